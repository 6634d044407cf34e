#include "observability/metrics.h"

#include <cstdio>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "observability/process_metrics.h"

namespace distjob {
namespace {

enum class Kind { kCounter, kGauge, kHistogram };

struct Definition {
  const char* name;
  Kind kind;
  const char* help;
  // Extra labels whose series exist from the start (at 0), so that a
  // rate() over them has a first sample: "" for a plain series, nullptr
  // ends the list (none for a histogram).
  const char* preset[5];
};

// Every series the agent exposes; docs/observability.md
// lists the same names.
constexpr Definition kDefinitions[] = {
    {"distjob_worker_group_restarts_total",
     Kind::kCounter,
     "Worker group restarts, by cause.",
     {"cause=\"retryable_exit\"", "cause=\"membership_change\"",
      "cause=\"hang\"", "cause=\"oom\"", nullptr}},
    {"distjob_rendezvous_rounds_total",
     Kind::kCounter,
     "Rendezvous rounds this node took part in.",
     {"", nullptr}},
    {"distjob_worker_exits_total",
     Kind::kCounter,
     "Failed worker group attempts, by the exit class of the first "
     "failure.",
     {"class=\"retryable\"", "class=\"permanent\"", nullptr}},
    {"distjob_attempt",
     Kind::kGauge,
     "The current attempt (failure restarts so far).",
     {"", nullptr}},
    {"distjob_rendezvous_round",
     Kind::kGauge,
     "The rendezvous round the workers run in.",
     {"", nullptr}},
    {"distjob_group_rank",
     Kind::kGauge,
     "This node's group rank.",
     {"", nullptr}},
    {"distjob_group_world_size",
     Kind::kGauge,
     "Nodes in the round.",
     {"", nullptr}},
    {"distjob_local_workers_alive",
     Kind::kGauge,
     "Workers of this node's group running now.",
     {"", nullptr}},
    {"distjob_last_exit_code",
     Kind::kGauge,
     "Exit code of the last failed worker (0: none failed).",
     {"", nullptr}},
    {"distjob_last_exit_class",
     Kind::kGauge,
     "1 for the exit class of the last failed worker, 0 for the others.",
     {"class=\"retryable\"", "class=\"permanent\"", nullptr}},
    {"distjob_dns_wait_seconds",
     Kind::kGauge,
     "Time discovery waited for this pod's identity and peers' DNS names.",
     {"", nullptr}},
    {"distjob_store_keys",
     Kind::kGauge,
     "Keys in the rendezvous store this agent hosts.",
     {nullptr}},
    {"distjob_store_bytes",
     Kind::kGauge,
     "Bytes the rendezvous store this agent hosts holds: keys, values, "
     "tombstones and parked waits with their overhead.",
     {nullptr}},
    {"distjob_store_parked_waits",
     Kind::kGauge,
     "Blocked gets and watches parked in the hosted store.",
     {nullptr}},
    {"distjob_store_requests_total",
     Kind::kCounter,
     "gRPC requests the hosted store answered, by method and status code.",
     {nullptr}},
    {"distjob_store_lease_expiries_total",
     Kind::kCounter,
     "Keys of the hosted store dropped because their lease ran out.",
     {nullptr}},
    {"distjob_store_connections",
     Kind::kGauge,
     "Connections open to the hosted store.",
     {nullptr}},
    {"distjob_store_connections_closed_total",
     Kind::kCounter,
     "Connections the hosted store closed at once, by reason: refused (a "
     "cap was reached), evicted (to admit another address), "
     "protocol_mismatch (TLS to a plaintext store, or the reverse).",
     {nullptr}},
    {"distjob_worker_store_serving",
     Kind::kGauge,
     "1 while this agent serves the workers' TCPStore (group rank 0 with "
     "TORCHELASTIC_USE_AGENT_STORE=True), else 0.",
     {nullptr}},
    {"distjob_worker_store_keys",
     Kind::kGauge,
     "Keys in the workers' TCPStore this agent serves.",
     {nullptr}},
    {"distjob_worker_store_bytes",
     Kind::kGauge,
     "Bytes the workers' TCPStore holds, counted as against its limit.",
     {nullptr}},
    {"distjob_worker_store_clients",
     Kind::kGauge,
     "TCPStore client connections open now.",
     {nullptr}},
    {"distjob_worker_store_parked_waits",
     Kind::kGauge,
     "Blocked waits and gets parked in the workers' TCPStore.",
     {nullptr}},
    {"distjob_worker_store_requests_total",
     Kind::kCounter,
     "Requests the workers' TCPStore answered, by operation.",
     {nullptr}},
    {"distjob_worker_store_protocol_errors_total",
     Kind::kCounter,
     "TCPStore connections closed for a malformed, unknown or over-limit "
     "request.",
     {nullptr}},
    {"distjob_worker_store_refused_connections_total",
     Kind::kCounter,
     "TCPStore connections refused at accept (not a round member while the "
     "job has a token, or over the connection limits).",
     {nullptr}},
    {"distjob_worker_store_buffered_bytes",
     Kind::kGauge,
     "Memory the workers' TCPStore connections hold (buffers and "
     "bookkeeping), counted as against max_buffered_bytes.",
     {nullptr}},
    {"distjob_worker_store_evictions_total",
     Kind::kCounter,
     "TCPStore connections closed to make room for another address's "
     "connection or wait when a budget was full (the address holding the "
     "most gives way).",
     {nullptr}},
    {"distjob_worker_store_accept_pauses_total",
     Kind::kCounter,
     "Times the workers' TCPStore stopped accepting connections because the "
     "agent was out of file descriptors (it accepts again once a client "
     "leaves, or after a second).",
     {nullptr}},
    {"distjob_rendezvous_duration_seconds",
     Kind::kHistogram,
     "Time from joining a round to its close, waiting for peers included.",
     {nullptr}},
    {"distjob_rendezvous_wait_seconds",
     Kind::kHistogram,
     "The part of each round's rendezvous spent blocked waiting for other "
     "nodes.",
     {nullptr}},
};

const Definition* Find(const std::string& name) {
  for (const Definition& d : kDefinitions) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

// Buckets for waits from a standalone round (milliseconds) to a slow
// elastic start (minutes).
const std::vector<double>& Buckets() {
  static const auto* const buckets = new std::vector<double>{
      0.005, 0.025, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900};
  return *buckets;
}

std::string FormatValue(double v) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.15g", v);
  return text;
}

// `base` and `extra` as one label set.
std::string Labels(const std::string& base, const std::string& extra) {
  if (extra.empty()) return base.empty() ? "" : absl::StrCat("{", base, "}");
  if (base.empty()) return absl::StrCat("{", extra, "}");
  return absl::StrCat("{", base, ",", extra, "}");
}

const char* TypeName(Kind kind) {
  switch (kind) {
    case Kind::kCounter:
      return "counter";
    case Kind::kGauge:
      return "gauge";
    case Kind::kHistogram:
      return "histogram";
  }
  return "untyped";
}

void Header(std::string* out, const char* name, const char* type,
            const char* help) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type,
                  "\n");
}

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
  return absl::StrReplaceAll(value,
                             {{"\\", "\\\\"}, {"\"", "\\\""}, {"\n", "\\n"}});
}

Metrics::Metrics() {
  absl::MutexLock lock(&mu_);
  for (const Definition& d : kDefinitions) {
    if (d.kind == Kind::kHistogram) {
      histograms_[d.name].counts.assign(Buckets().size(), 0);
      continue;
    }
    for (const char* const* label = d.preset; *label != nullptr; ++label) {
      values_[d.name][*label] = 0;
    }
  }
}

void Metrics::SetJobLabels(const std::string& job, const std::string& role,
                           int node_rank) {
  absl::MutexLock lock(&mu_);
  labels_ =
      absl::StrCat("job_name=\"", EscapeLabelValue(job), "\",role=\"",
                   EscapeLabelValue(role), "\",node_rank=\"", node_rank, "\"");
}

void Metrics::SetBuild(const std::string& version, const std::string& commit) {
  absl::MutexLock lock(&mu_);
  build_labels_ = absl::StrCat("version=\"", EscapeLabelValue(version),
                               "\",commit=\"", EscapeLabelValue(commit), "\"");
}

void Metrics::Increment(const std::string& name, const std::string& label,
                        double by) {
  if (Find(name) == nullptr) return;
  absl::MutexLock lock(&mu_);
  values_[name][label] += by;
}

void Metrics::Set(const std::string& name, double value,
                  const std::string& label) {
  if (Find(name) == nullptr) return;
  absl::MutexLock lock(&mu_);
  values_[name][label] = value;
}

void Metrics::Observe(const std::string& name, double seconds) {
  absl::MutexLock lock(&mu_);
  auto it = histograms_.find(name);
  if (it == histograms_.end()) return;
  Histogram& h = it->second;
  for (size_t i = 0; i < Buckets().size(); ++i) {
    if (seconds <= Buckets()[i]) {
      h.counts[i] += 1;
      break;
    }
  }
  h.sum += seconds;
  h.count += 1;
}

void Metrics::SetCollector(std::function<void(Metrics&)> collector) {
  absl::MutexLock lock(&mu_);
  collector_ = std::move(collector);
}

std::string Metrics::Render() {
  std::function<void(Metrics&)> collector;
  {
    absl::MutexLock lock(&mu_);
    collector = collector_;
  }
  if (collector) collector(*this);
  std::string out;
  absl::MutexLock lock(&mu_);
  for (const Definition& d : kDefinitions) {
    Header(&out, d.name, TypeName(d.kind), d.help);
    if (d.kind == Kind::kHistogram) {
      const Histogram& h = histograms_.at(d.name);
      double cumulative = 0;
      for (size_t i = 0; i < Buckets().size(); ++i) {
        cumulative += h.counts[i];
        absl::StrAppend(
            &out, d.name, "_bucket",
            Labels(labels_,
                   absl::StrCat("le=\"", FormatValue(Buckets()[i]), "\"")),
            " ", FormatValue(cumulative), "\n");
      }
      absl::StrAppend(&out, d.name, "_bucket", Labels(labels_, "le=\"+Inf\""),
                      " ", FormatValue(h.count), "\n");
      absl::StrAppend(&out, d.name, "_sum", Labels(labels_, ""), " ",
                      FormatValue(h.sum), "\n");
      absl::StrAppend(&out, d.name, "_count", Labels(labels_, ""), " ",
                      FormatValue(h.count), "\n");
      continue;
    }
    auto it = values_.find(d.name);
    if (it == values_.end()) continue;
    for (const auto& [label, value] : it->second) {
      absl::StrAppend(&out, d.name, Labels(labels_, label), " ",
                      FormatValue(value), "\n");
    }
  }
  out += RenderProcessMetrics(SampleProcess(), Labels(labels_, ""));
  // The info-metric convention: constant 1, the build in its labels (with
  // the job's, as every series here).
  Header(&out, "distjob_build_info", "gauge",
         "The agent's release and the commit it was built from.");
  absl::StrAppend(&out, "distjob_build_info", Labels(labels_, build_labels_),
                  " 1\n");
  return out;
}

Metrics& GlobalMetrics() {
  static Metrics* const metrics = new Metrics();
  return *metrics;
}

}  // namespace distjob
