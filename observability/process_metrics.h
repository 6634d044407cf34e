// The agent's own process, read at scrape time under the names every
// Prometheus client library exports (process_cpu_seconds_total, …), so
// dashboards and alerts written for any exporter's process metrics work
// on the agent's /metrics unchanged.
#ifndef DISTJOB_OBSERVABILITY_PROCESS_METRICS_H_
#define DISTJOB_OBSERVABILITY_PROCESS_METRICS_H_

#include <string>

namespace distjob {

// The agent process now (workers not included); a value that cannot be
// read is 0.
struct ProcessSample {
  double cpu_seconds = 0;         // user + system
  double resident_bytes = 0;      // /proc/self/statm
  double start_time_seconds = 0;  // Unix time the process started
  double open_fds = 0;            // entries of /proc/self/fd
  double max_fds = 0;             // RLIMIT_NOFILE's soft limit
  // What malloc has handed out and not had back (glibc's mallinfo2: chunks
  // in use in every arena, and mmapped blocks). RSS also holds the free
  // memory malloc keeps and moves in its steps; this is what the agent's
  // data holds, so a connection's cost can be read from it exactly.
  double heap_in_use_bytes = 0;
};

ProcessSample SampleProcess();

// The five process_* families and distjob_heap_in_use_bytes in the text
// exposition format, each series with `labels` (already "{…}"-wrapped, or
// "" for none).
std::string RenderProcessMetrics(const ProcessSample& sample,
                                 const std::string& labels);

}  // namespace distjob

#endif  // DISTJOB_OBSERVABILITY_PROCESS_METRICS_H_
