#include "rendezvous/rendezvous_kind.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(ChooseRendezvousTest, EveryKind) {
  struct Row {
    bool standalone;
    int max_nodes;
    RdzvBackend backend;
    RendezvousKind want;
  } rows[] = {
      {true, 1, RdzvBackend::kStatic, RendezvousKind::kLocal},
      {true, 4, RdzvBackend::kC10d, RendezvousKind::kLocal},
      {false, 1, RdzvBackend::kStatic, RendezvousKind::kLocal},
      {false, 2, RdzvBackend::kStatic, RendezvousKind::kStatic},
      {false, 1, RdzvBackend::kC10d, RendezvousKind::kDynamic},
      {false, 8, RdzvBackend::kEtcd, RendezvousKind::kDynamic},
      {false, 8, RdzvBackend::kEtcdV3, RendezvousKind::kDynamic},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(ChooseRendezvous(r.standalone, r.max_nodes, r.backend), r.want)
        << r.standalone << " " << r.max_nodes << " "
        << RdzvBackendName(r.backend);
  }
}

}  // namespace
}  // namespace distjob
