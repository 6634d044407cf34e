// The agent's Prometheus metrics: a small registry of counters, gauges and
// histograms, rendered in the text exposition format (version 0.0.4) for
// the /metrics endpoint (observability/http_server.h). Every series carries the
// job_name, role and node_rank labels set once at start-up, so a dashboard
// over many pods groups by them without relabelling (job_name, not job:
// Prometheus' own target label `job` would rename ours exported_job).
#ifndef DISTJOB_OBSERVABILITY_METRICS_H_
#define DISTJOB_OBSERVABILITY_METRICS_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace distjob {

class Metrics {
 public:
  Metrics();

  // The labels every series gets (values are escaped when rendered).
  void SetJobLabels(const std::string& job, const std::string& role,
                    int node_rank);

  // The build distjob_build_info names ("unknown" for both until set): the
  // agent passes its stamp in (agent/build_info.h), so this package needs
  // nothing above common/.
  void SetBuild(const std::string& version, const std::string& commit);

  // `name` must be declared in metrics.cc's kDefinitions;
  // `label` is an optional extra "key=value" pair (e.g. cause=hang).
  void Increment(const std::string& name, const std::string& label = "",
                 double by = 1);
  void Set(const std::string& name, double value,
           const std::string& label = "");
  void Observe(const std::string& name, double seconds);

  // Runs at the start of every Render, outside the registry's lock, to
  // Set series read from elsewhere at scrape time (the hosted store's);
  // nullptr: none.
  void SetCollector(std::function<void(Metrics&)> collector);

  // The text exposition of every series, and of the agent's own process
  // (observability/process_metrics.h) read now.
  std::string Render();

 private:
  struct Histogram {
    std::vector<double> counts;  // one per bucket, cumulative when rendered
    double sum = 0;
    double count = 0;
  };
  mutable absl::Mutex mu_;
  std::string labels_ ABSL_GUARDED_BY(mu_);
  std::string build_labels_ ABSL_GUARDED_BY(mu_) =
      "version=\"unknown\",commit=\"unknown\"";
  std::function<void(Metrics&)> collector_ ABSL_GUARDED_BY(mu_);
  // name -> extra label -> value
  std::map<std::string, std::map<std::string, double>> values_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, Histogram> histograms_ ABSL_GUARDED_BY(mu_);
};

// The process-wide registry: hooks anywhere in the agent call into it, and
// it costs nothing to update when no server reads it.
Metrics& GlobalMetrics();

// A label value escaped for the exposition format (\\, \" and \n).
std::string EscapeLabelValue(const std::string& value);

}  // namespace distjob

#endif  // DISTJOB_OBSERVABILITY_METRICS_H_
