#include "observability/process_metrics.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <ctime>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

using ::testing::HasSubstr;

TEST(ProcessMetricsTest, SampleReadsThisProcess) {
  const ProcessSample before = SampleProcess();
  const int fd = open("/dev/null", O_RDONLY);
  ASSERT_GE(fd, 0);
  const ProcessSample after = SampleProcess();
  close(fd);
  EXPECT_EQ(after.open_fds, before.open_fds + 1);
  EXPECT_GT(before.open_fds, 0);
  struct rlimit limit {};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  EXPECT_EQ(after.max_fds, static_cast<double>(limit.rlim_cur));
  EXPECT_GT(after.resident_bytes, 0);
  EXPECT_GT(after.heap_in_use_bytes, 0);
  // Started in the last hour, not in the future (the tick is 10 ms).
  const double now = static_cast<double>(std::time(nullptr));
  EXPECT_LE(after.start_time_seconds, now + 1);
  EXPECT_GT(after.start_time_seconds, now - 3600);
}

TEST(ProcessMetricsTest, HeapInUseFollowsWhatIsAllocated) {
  // 1 MiB held moves the figure by at least that much (an mmapped block),
  // and freeing it takes it back out, whatever malloc keeps in its arenas.
  const double before = SampleProcess().heap_in_use_bytes;
  constexpr size_t kBlock = 1 << 20;
  char* block = new char[kBlock];
  block[0] = 1;
  const double held = SampleProcess().heap_in_use_bytes;
  delete[] block;
  const double after = SampleProcess().heap_in_use_bytes;
  EXPECT_GE(held - before, static_cast<double>(kBlock));
  EXPECT_LT(after, held - static_cast<double>(kBlock) / 2);
}

TEST(ProcessMetricsTest, RendersTheStandardNames) {
  ProcessSample s;
  s.cpu_seconds = 1.5;
  s.resident_bytes = 4096;
  s.start_time_seconds = 1700000000;
  s.open_fds = 7;
  s.max_fds = 1024;
  s.heap_in_use_bytes = 65536;
  const std::string text = RenderProcessMetrics(s, "{job_name=\"j\"}");
  EXPECT_THAT(text, HasSubstr("# TYPE process_cpu_seconds_total counter\n"
                              "process_cpu_seconds_total{job_name=\"j\"} "
                              "1.5\n"));
  EXPECT_THAT(text, HasSubstr("process_resident_memory_bytes{job_name=\"j\"} "
                              "4096\n"));
  EXPECT_THAT(text, HasSubstr("process_start_time_seconds{job_name=\"j\"} "
                              "1700000000\n"));
  EXPECT_THAT(text, HasSubstr("process_open_fds{job_name=\"j\"} 7\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE process_max_fds gauge\n"
                              "process_max_fds{job_name=\"j\"} 1024\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE distjob_heap_in_use_bytes gauge\n"
                              "distjob_heap_in_use_bytes{job_name=\"j\"} "
                              "65536\n"));
}

}  // namespace
}  // namespace distjob
