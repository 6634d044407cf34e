#include "rendezvous/protocol_version.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rendezvous/store/store_core.h"

namespace distjob {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kKey[] = "rdzv/job/protocol";

// The in-memory store, as the agents on the store's host see it.
struct Store {
  StoreCore core;
  LocalStore view{&core};
};

TEST(RdzvProtocolTest, TheFirstAgentRecordsItsVersion) {
  Store store;
  ASSERT_TRUE(CheckRdzvProtocol(&store.view, kKey, 3).ok());
  auto value = store.view.Get(kKey, absl::Seconds(1));
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "3");
}

TEST(RdzvProtocolTest, AJoinerOfTheSameVersionIsAdmitted) {
  Store store;
  ASSERT_TRUE(CheckRdzvProtocol(&store.view, kKey, 1).ok());
  EXPECT_TRUE(CheckRdzvProtocol(&store.view, kKey, 1).ok());
}

TEST(RdzvProtocolTest, AJoinerOfAnotherVersionIsRefusedNamingBoth) {
  Store store;
  ASSERT_TRUE(CheckRdzvProtocol(&store.view, kKey, 1).ok());
  const absl::Status s = CheckRdzvProtocol(&store.view, kKey, 2);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_TRUE(IsRdzvProtocolMismatch(s));
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("rendezvous protocol version 1"),
                    HasSubstr("this agent speaks version 2"), HasSubstr(kKey)));
  // The job's version stays the first agent's.
  EXPECT_EQ(*store.view.Get(kKey, absl::Seconds(1)), "1");
}

TEST(RdzvProtocolTest, AGarbledRecordIsQuotedNotParsed) {
  Store store;
  ASSERT_TRUE(store.view.CompareSet(kKey, "", "v\x01").ok());
  const absl::Status s = CheckRdzvProtocol(&store.view, kKey, 1);
  EXPECT_TRUE(IsRdzvProtocolMismatch(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("version 'v"));
}

TEST(RdzvProtocolTest, OnlyTheRefusalIsAMismatch) {
  EXPECT_FALSE(IsRdzvProtocolMismatch(absl::FailedPreconditionError("closed")));
  EXPECT_FALSE(IsRdzvProtocolMismatch(absl::OkStatus()));
}

TEST(RdzvProtocolTest, TheShippedVersionIsTheConstant) {
  EXPECT_EQ(RdzvProtocolVersion(), kRdzvProtocolVersion);
}

}  // namespace
}  // namespace distjob
