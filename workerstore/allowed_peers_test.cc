#include "workerstore/allowed_peers.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(AllowedPeersTest, EmptyAdmitsEveryone) {
  AllowedPeers a;
  EXPECT_TRUE(a.Admits("10.0.0.1"));
  a.Set({"10.0.0.2"});
  a.Set({});
  EXPECT_TRUE(a.Admits("10.0.0.1"));
}

TEST(AllowedPeersTest, AdmitsTheListedAddressesInTheirNumericForm) {
  AllowedPeers a;
  a.Set({"10.0.0.2", "::ffff:10.0.0.3", "not-an-ip"});
  EXPECT_TRUE(a.Admits("10.0.0.2"));
  EXPECT_TRUE(a.Admits("10.0.0.3"));  // IPv4-mapped, normalised
  EXPECT_FALSE(a.Admits("10.0.0.1"));
  EXPECT_FALSE(a.Admits("not-an-ip"));
}

}  // namespace
}  // namespace distjob
