#include "workerstore/tcpstore_data.h"

#include "gtest/gtest.h"
#include "workerstore/tcpstore_limits.h"
#include "workerstore/tcpstore_protocol.h"

namespace distjob {
namespace {

TEST(TcpStoreDataTest, CountsEachEntryWithItsKeyAndValue) {
  TcpStoreData d(1 << 20);
  d.Put("/k", "abc");
  EXPECT_EQ(d.total_bytes(), 2 + 3 + kTcpStoreKeyBytes);
  EXPECT_EQ(d.keys(), 1);
  d.Put("/k", "a");  // a new value: the entry is counted once
  EXPECT_EQ(d.total_bytes(), 2 + 1 + kTcpStoreKeyBytes);
  EXPECT_EQ(d.bytes(), static_cast<int64_t>(d.total_bytes()));
  ASSERT_NE(d.Find("/k"), nullptr);
  EXPECT_EQ(d.Find("/k")->bytes(), "a");
  EXPECT_TRUE(d.Erase("/k"));
  EXPECT_FALSE(d.Erase("/k"));
  EXPECT_EQ(d.Find("/k"), nullptr);
  EXPECT_EQ(d.total_bytes(), 0u);
  EXPECT_EQ(d.keys(), 0);
}

TEST(TcpStoreDataTest, AValueIsHeldInTheFormAnAnswerSendsIt) {
  TcpStoreData d(1 << 20);
  d.Put("/k", "abc");
  const TcpStoreValue* v = d.Find("/k");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->size(), 3u);
  std::string answer;
  tcpstore::AppendBytes(&answer, "abc");
  EXPECT_EQ(v->wire(), answer);
  EXPECT_EQ(v->shared(), nullptr);  // small: copied into answers
  const std::string large(kShareValuesFrom, 'x');
  d.Put("/large", large);
  v = d.Find("/large");
  ASSERT_NE(v->shared(), nullptr);
  EXPECT_EQ(v->bytes(), large);
  EXPECT_EQ(v->wire().size(), sizeof(uint64_t) + large.size());
}

TEST(TcpStoreDataTest, AnOverwrittenValueStaysWhileReferred) {
  TcpStoreData d(1 << 20);
  const std::string old_value(kShareValuesFrom, 'o');
  d.Put("/k", old_value);
  const std::shared_ptr<const std::string> queued = d.Find("/k")->shared();
  d.Put("/k", std::string(kShareValuesFrom, 'n'));
  EXPECT_EQ(d.Find("/k")->bytes(), std::string(kShareValuesFrom, 'n'));
  EXPECT_EQ(queued->substr(sizeof(uint64_t)), old_value);
  d.Erase("/k");
  EXPECT_EQ(queued->substr(sizeof(uint64_t)), old_value);
}

TEST(TcpStoreDataTest, FitsAnswersForANewKeyAndForAReplacedValue) {
  const size_t max = 2 + 10 + kTcpStoreKeyBytes;
  TcpStoreData d(max);
  EXPECT_TRUE(d.Fits("/k", 10));
  EXPECT_FALSE(d.Fits("/k", 11));
  d.Put("/k", std::string(10, 'x'));
  // Replacing counts the value's difference only.
  EXPECT_TRUE(d.Fits("/k", 10));
  EXPECT_FALSE(d.Fits("/k", 11));
  EXPECT_FALSE(d.Fits("/j", 0));
}

TEST(TcpStoreDataTest, AQueueIsFirstInFirstOutAndCountedUntilPopped) {
  TcpStoreData d(1 << 20);
  EXPECT_FALSE(d.Exists("/q"));
  ASSERT_TRUE(d.Push("/q", "i1"));
  ASSERT_TRUE(d.Push("/q", "i22"));
  EXPECT_TRUE(d.Exists("/q"));
  EXPECT_EQ(d.QueueLength("/q"), 2u);
  EXPECT_EQ(d.total_bytes(), 2 * (2 + kTcpStoreKeyBytes) + 2 + 3);
  EXPECT_EQ(d.keys(), 0);  // a queue is not a key's value
  EXPECT_EQ(d.Find("/q"), nullptr);
  EXPECT_EQ(d.Pop("/q"), "i1");
  EXPECT_EQ(d.Pop("/q"), "i22");
  EXPECT_EQ(d.Pop("/q"), std::nullopt);
  EXPECT_FALSE(d.Exists("/q"));
  EXPECT_EQ(d.QueueLength("/q"), 0u);
  EXPECT_EQ(d.total_bytes(), 0u);
  EXPECT_EQ(d.bytes(), 0);
}

TEST(TcpStoreDataTest, APushOverMaxTotalBytesAddsNothing) {
  TcpStoreData d(2 + 2 + kTcpStoreKeyBytes);
  ASSERT_TRUE(d.Push("/q", "i1"));
  EXPECT_FALSE(d.Push("/q", ""));
  EXPECT_EQ(d.QueueLength("/q"), 1u);
  EXPECT_EQ(d.total_bytes(), 2 + 2 + kTcpStoreKeyBytes);
}

TEST(TcpStoreDataTest, ClearDropsValuesAndQueues) {
  TcpStoreData d(1 << 20);
  d.Put("/a", "1");
  ASSERT_TRUE(d.Push("/q", "i"));
  d.Clear();
  EXPECT_TRUE(d.values().empty());
  EXPECT_FALSE(d.Exists("/q"));
  EXPECT_EQ(d.total_bytes(), 0u);
  EXPECT_EQ(d.keys(), 0);
  EXPECT_EQ(d.bytes(), 0);
}

}  // namespace
}  // namespace distjob
