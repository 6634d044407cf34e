#include "observability/metrics.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace distjob {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(MetricsTest, SeriesCarryTheJobLabelsAndStartAtZero) {
  Metrics metrics;
  metrics.SetJobLabels("train", "trainer", 3);
  const std::string text = metrics.Render();
  EXPECT_THAT(text, HasSubstr("# TYPE distjob_worker_group_restarts_total "
                              "counter\n"));
  EXPECT_THAT(
      text, HasSubstr("distjob_worker_group_restarts_total{job_name=\"train\","
                      "role=\"trainer\",node_rank=\"3\",cause=\"hang\"} "
                      "0\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE process_cpu_seconds_total counter"));
}

TEST(MetricsTest, BuildInfoIsOneWithTheVersionAndCommit) {
  Metrics metrics;
  metrics.SetJobLabels("train", "trainer", 3);
  metrics.SetBuild("0.2.0", "abc1234-dirty");
  const std::string text = metrics.Render();
  EXPECT_THAT(text, HasSubstr("# TYPE distjob_build_info gauge\n"));
  EXPECT_THAT(text, HasSubstr("distjob_build_info{job_name=\"train\","
                              "role=\"trainer\",node_rank=\"3\","
                              "version=\"0.2.0\",commit=\"abc1234-dirty\"} "
                              "1\n"));
}

TEST(MetricsTest, BuildInfoSaysUnknownUntilTheBuildIsSet) {
  Metrics metrics;
  EXPECT_THAT(metrics.Render(),
              HasSubstr("distjob_build_info{version=\"unknown\","
                        "commit=\"unknown\"} 1\n"));
}

TEST(MetricsTest, CountersAddAndGaugesSet) {
  Metrics metrics;
  metrics.Increment("distjob_worker_group_restarts_total", "cause=\"oom\"");
  metrics.Increment("distjob_worker_group_restarts_total", "cause=\"oom\"");
  metrics.Set("distjob_group_world_size", 4);
  metrics.Set("distjob_group_world_size", 2);
  const std::string text = metrics.Render();
  EXPECT_THAT(
      text,
      HasSubstr("distjob_worker_group_restarts_total{cause=\"oom\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("distjob_group_world_size 2\n"));
}

TEST(MetricsTest, TheCollectorSetsSeriesAtEveryRender) {
  Metrics metrics;
  EXPECT_THAT(metrics.Render(), Not(HasSubstr("\ndistjob_store_keys ")));
  int scrapes = 0;
  metrics.SetCollector([&scrapes](Metrics& m) {
    ++scrapes;
    m.Set("distjob_store_keys", scrapes);
    m.Set("distjob_store_requests_total", 5, "method=\"Get\",code=\"OK\"");
  });
  EXPECT_THAT(metrics.Render(), HasSubstr("distjob_store_keys 1\n"));
  const std::string text = metrics.Render();
  EXPECT_THAT(text, HasSubstr("distjob_store_keys 2\n"));
  EXPECT_THAT(text, HasSubstr("distjob_store_requests_total{method=\"Get\","
                              "code=\"OK\"} 5\n"));
}

TEST(MetricsTest, UndeclaredNamesAreIgnored) {
  Metrics metrics;
  metrics.Increment("distjob_made_up_total");
  EXPECT_THAT(metrics.Render(), Not(HasSubstr("distjob_made_up_total")));
}

TEST(MetricsTest, HistogramBucketsAreCumulative) {
  Metrics metrics;
  metrics.Observe("distjob_rendezvous_duration_seconds", 0.2);
  metrics.Observe("distjob_rendezvous_duration_seconds", 7);
  const std::string text = metrics.Render();
  EXPECT_THAT(text, HasSubstr("distjob_rendezvous_duration_seconds_bucket{le="
                              "\"0.1\"} 0\n"));
  EXPECT_THAT(
      text,
      HasSubstr("distjob_rendezvous_duration_seconds_bucket{le=\"1\"} 1\n"));
  EXPECT_THAT(
      text,
      HasSubstr("distjob_rendezvous_duration_seconds_bucket{le=\"10\"} 2\n"));
  EXPECT_THAT(
      text, HasSubstr("distjob_rendezvous_duration_seconds_bucket{le=\"+Inf\"} "
                      "2\n"));
  EXPECT_THAT(text, HasSubstr("distjob_rendezvous_duration_seconds_sum 7.2\n"));
  EXPECT_THAT(text, HasSubstr("distjob_rendezvous_duration_seconds_count 2\n"));
}

TEST(MetricsTest, LabelValuesAreEscaped) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

}  // namespace
}  // namespace distjob
