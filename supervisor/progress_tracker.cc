#include "supervisor/progress_tracker.h"

#include <sys/stat.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/text.h"

namespace distjob {

ProgressFileState ReadProgressFile(const std::string& path) {
  ProgressFileState state;
  struct stat st;
  // Not a regular file (a FIFO, a directory): nothing the training writes
  // its step into; reading it could block.
  if (path.empty() || stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return state;
  }
  state.exists = true;
  state.mtime = absl::TimeFromTimespec(st.st_mtim);
  state.content = ReadSmallFile(path, kProgressFileBytes);
  return state;
}

bool ProgressFileChanged(const ProgressFileState& before,
                         const ProgressFileState& after) {
  if (!after.exists) return false;
  if (!before.exists) return true;
  // mtime alone misses a rewrite within the filesystem's timestamp
  // granularity; content alone misses a touch of an unchanged step.
  return after.mtime != before.mtime || after.content != before.content;
}

ProgressTracker::ProgressTracker(std::string progress_file, int limit)
    : progress_file_(std::move(progress_file)), limit_(limit) {}

void ProgressTracker::AttemptStarted(absl::Time now) {
  started_ = now;
  file_before_ = ReadProgressFile(progress_file_);
}

bool ProgressTracker::AttemptFailed(absl::Time last_activity) {
  const bool progressed =
      last_activity > started_ ||
      (!progress_file_.empty() &&
       ProgressFileChanged(file_before_, ReadProgressFile(progress_file_)));
  without_progress_ = progressed ? 0 : without_progress_ + 1;
  return progressed;
}

std::string ProgressTracker::Describe() const {
  return absl::StrCat(without_progress_,
                      " consecutive attempt(s) ended without progress (no "
                      "heartbeat or FileTimer request",
                      progress_file_.empty()
                          ? ""
                          : absl::StrCat(", no change of ",
                                         QuoteForMessage(progress_file_, 1024)),
                      "; --max-no-progress-restarts ", limit_, ")");
}

}  // namespace distjob
