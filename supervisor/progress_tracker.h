// Whether an attempt of the worker group made progress, and how many
// attempts in a row ended without any (--max-no-progress-restarts). A job
// that crashes before its first step restarts forever otherwise: each
// restart looks like a fresh, retryable failure.
//
// Progress during an attempt is any of: a worker's heartbeat touch or
// FileTimer request seen after the attempt started (GroupResult's
// last_activity), or --progress-file (e.g. the training's checkpoint
// iteration) created, modified or rewritten with other content.
#ifndef DISTJOB_SUPERVISOR_PROGRESS_TRACKER_H_
#define DISTJOB_SUPERVISOR_PROGRESS_TRACKER_H_

#include <string>

#include "absl/time/time.h"

namespace distjob {

// What a progress file looked like at one moment.
struct ProgressFileState {
  bool exists = false;
  absl::Time mtime = absl::InfinitePast();
  std::string content;  // its first kProgressFileBytes bytes
};

// Enough for a step or checkpoint number, or a small JSON status.
inline constexpr size_t kProgressFileBytes = 4096;

// Reads `path`'s state; a missing or unreadable file does not exist.
ProgressFileState ReadProgressFile(const std::string& path);

// Whether the file changed from `before` to `after` in a way that shows
// the training wrote it: it appeared, or its mtime or content changed. A
// file removed is not progress.
bool ProgressFileChanged(const ProgressFileState& before,
                         const ProgressFileState& after);

class ProgressTracker {
 public:
  // `progress_file`: "" for none. `limit`: the number of consecutive
  // attempts without progress that ends the job; 0 never does.
  ProgressTracker(std::string progress_file, int limit);

  // Before an attempt starts: remembers when, and the progress file.
  void AttemptStarted(absl::Time now);

  // After a failed attempt: `last_activity` is the latest heartbeat or
  // FileTimer sign the supervisor saw (InfinitePast for none). Returns
  // whether the attempt progressed; counts it if not, else resets.
  bool AttemptFailed(absl::Time last_activity);

  // Whether the count reached the limit: the job must stop.
  bool Exhausted() const { return limit_ > 0 && without_progress_ >= limit_; }
  int without_progress() const { return without_progress_; }
  int limit() const { return limit_; }

  // "3 consecutive attempts ended without progress (no heartbeat, FileTimer
  // request or change of /ckpt/iter)", for the decision line.
  std::string Describe() const;

 private:
  const std::string progress_file_;
  const int limit_;
  absl::Time started_ = absl::InfinitePast();
  ProgressFileState file_before_;
  int without_progress_ = 0;
};

}  // namespace distjob

#endif  // DISTJOB_SUPERVISOR_PROGRESS_TRACKER_H_
