// Kubeflow Trainer v2's progress push (KEP-2779): which of the
// KUBEFLOW_TRAINER_SERVER_* variables the agent was given, the JSON body it
// POSTs to the TrainJob's status endpoint and the progress file workers
// write (pure functions, unit-tested without a server), and the poster, a
// thread of its own that POSTs them over HTTPS and never blocks or fails
// the job.
#ifndef DISTJOB_OBSERVABILITY_TRAINER_STATUS_H_
#define DISTJOB_OBSERVABILITY_TRAINER_STATUS_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/environment.h"

struct x509_store_st;  // OpenSSL's X509_STORE

namespace distjob {

inline constexpr char kTrainerServerUrlEnv[] = "KUBEFLOW_TRAINER_SERVER_URL";
inline constexpr char kTrainerServerCaCertEnv[] =
    "KUBEFLOW_TRAINER_SERVER_CA_CERT";
inline constexpr char kTrainerServerTokenEnv[] =
    "KUBEFLOW_TRAINER_SERVER_TOKEN";

// A worker's progress file is read up to this size; a larger one is not
// JSON the agent relays.
inline constexpr size_t kMaxProgressFileBytes = 64 * 1024;

struct TrainerStatusConfig {
  std::string url;
  std::string host;  // as written in the URL, for SNI, the host check and Host
  int port = 443;
  std::string path;  // with the query, if any
  std::string ca_cert_file;
  // The CA certificates, loaded once by TrainerStatusConfigFromEnv (Start
  // loads `ca_cert_file` when this is empty).
  std::shared_ptr<x509_store_st> ca_store;
  // A path: projected tokens rotate, so the content is read per post.
  std::string token_file;
};

// The endpoint the three variables name. nullopt when none is set, or when
// only some are (then `*warning` says which are missing: the push is off,
// the job runs). InvalidArgument naming the variable when the URL is not
// https://host[:port]/path, the CA file does not load as PEM certificates
// or the token file is not one LoadTrainerToken accepts: the agent exits 2
// before it starts anything.
absl::StatusOr<std::optional<TrainerStatusConfig>> TrainerStatusConfigFromEnv(
    const EnvMap& env, std::string* warning);

// A projected service-account token is ~1 KB; 16 KiB is far past any.
inline constexpr size_t kMaxTrainerTokenBytes = 16 * 1024;

// The token in KUBEFLOW_TRAINER_SERVER_TOKEN's file: one trailing newline
// (CRLF too) dropped, the rest one line of printable ASCII. InvalidArgument
// naming the variable and the file, never the token, when it cannot be read
// (a FIFO, too large) or holds anything else: a token with control bytes
// would go out raw in a header, or as no header at all.
absl::StatusOr<std::string> LoadTrainerToken(const std::string& path);

// Where DISTJOB_PROGRESS_FILE is made: the file in a directory mkdtemp(3)
// makes from this template, under `tmpdir` ($TMPDIR; "" is /tmp), once per
// agent; `env` shows it so.
std::string ProgressDirTemplate(absl::string_view tmpdir);
inline constexpr char kProgressFileName[] = "progress.json";

// What a worker reported through its progress file; every field optional.
struct TrainerProgress {
  std::optional<double> percentage;  // 0..100
  std::optional<int64_t> remaining_seconds;
  std::vector<std::pair<std::string, std::string>> metrics;
};

// `text` (a progress file's content) parsed: a JSON object with optional
// "progressPercentage" (a number in [0, 100]), "estimatedRemainingSeconds"
// (a non-negative integer) and "metrics" (an object of name to number or
// string, or a list of {"name","value"}). InvalidArgument naming `path`
// when it is none of these; the caller ignores the file then.
absl::StatusOr<TrainerProgress> ParseTrainerProgress(absl::string_view text,
                                                     absl::string_view path);

// The agent's own state, sent as metrics beside the worker's.
struct AgentStatusSnapshot {
  std::string phase;  // e.g. rendezvous, running, restarting, succeeded
  int restarts = 0;
  int attempt = 0;
  std::optional<int> last_exit_code;
  std::string last_exit_class;  // "" when nothing failed yet
};

// The POST body: {"trainerStatus":{"progressPercentage":..,
// "estimatedRemainingSeconds":..,"metrics":[{"name":..,"value":..}],
// "lastUpdatedTime":"RFC3339"}}; absent progress fields are left out, the
// agent's metrics (distjob_*) come first, then the worker's.
std::string TrainerStatusBody(const AgentStatusSnapshot& agent,
                              const TrainerProgress& progress, absl::Time now);

struct TrainerPosterOptions {
  // Between periodic posts (worker progress); lifecycle changes post at
  // once, but never two posts within `min_gap`.
  absl::Duration interval = absl::Seconds(5);
  absl::Duration min_gap = absl::Seconds(1);
  // Bounds one post: connect, TLS handshake, request and answer.
  absl::Duration timeout = absl::Seconds(5);
  // Bounds the last post at shutdown.
  absl::Duration final_timeout = absl::Milliseconds(500);
};

// Posts the agent's state and the workers' progress to the TrainJob's
// status endpoint from its own thread. Only the group rank 0 agent posts
// (SetGroupRank), so a TrainJob has one writer. Failures (no answer, TLS,
// 4xx/5xx) are a rate-limited warning, nothing else.
class TrainerStatusPoster {
 public:
  // InvalidArgument naming KUBEFLOW_TRAINER_SERVER_CA_CERT when its TLS
  // context cannot be made; Internal when the progress directory cannot.
  static absl::StatusOr<std::unique_ptr<TrainerStatusPoster>> Start(
      TrainerStatusConfig config, TrainerPosterOptions options = {});
  ~TrainerStatusPoster();

  // DISTJOB_PROGRESS_FILE for every worker of this node.
  const std::string& progress_file() const { return progress_file_; }

  void SetGroupRank(int group_rank);
  void SetPhase(const std::string& phase);
  void SetAttempt(int attempt);
  // A restart into attempt `attempt`.
  void Restarted(int attempt);
  void WorkerFailed(int exit_code, const std::string& exit_class);
  // Stops the thread within a second: one last bounded post of the final
  // state, if this node posts at all.
  void Shutdown();

  // Posts made and answered with 2xx (tests).
  int posts_accepted() const;

 private:
  TrainerStatusPoster(TrainerStatusConfig config, TrainerPosterOptions options)
      : config_(std::move(config)), options_(options) {}
  void Changed();
  void Loop();
  // One POST of the current state, bounded by `timeout`; a stop signal
  // ends it early unless it is the `final_post`.
  void PostOnce(absl::Duration timeout, bool final_post);
  std::string Body();
  void Warn(const std::string& message);

  const TrainerStatusConfig config_;
  const TrainerPosterOptions options_;
  std::string progress_dir_, progress_file_;
  void* tls_ = nullptr;   // SSL_CTX
  void* base_ = nullptr;  // event_base
  void* stop_event_ = nullptr;
  int stop_fd_ = -1;
  std::thread thread_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  AgentStatusSnapshot state_;
  TrainerProgress last_progress_;
  bool enabled_ = false;
  bool changed_ = true;
  bool stopping_ = false;
  int accepted_ = 0;
  absl::Time last_warning_ = absl::InfinitePast();
};

}  // namespace distjob

#endif  // DISTJOB_OBSERVABILITY_TRAINER_STATUS_H_
