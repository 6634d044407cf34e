#include "agent/stoppable_wait.h"

#include <thread>

#include "absl/synchronization/notification.h"
#include "common/logging.h"

namespace distjob {
namespace {

void LogProgress(const StoppableWait& wait, absl::Duration elapsed) {
  std::string line = wait.progress ? wait.progress() : std::string();
  if (line.empty()) line = wait.what;
  if (line.empty()) return;
  DJ_LOG_INFO("still waiting for {} ({} so far)", line,
              absl::FormatDuration(absl::Trunc(elapsed, absl::Seconds(1))));
}

}  // namespace

bool RunStoppable(const StoppableWait& wait) {
  absl::Notification done;
  std::thread waiter([&] {
    wait.step();
    done.Notify();
  });
  absl::Time cancel_at = absl::InfiniteFuture();
  absl::Time cancelled_at = absl::InfiniteFuture();
  bool cancelled = false, overrun_logged = false;
  ProgressLog progress(wait.progress_interval);
  while (!done.WaitForNotificationWithTimeout(wait.poll)) {
    if (!cancelled && progress.Due()) LogProgress(wait, progress.Elapsed());
    const absl::Time now = absl::Now();
    if (cancelled) {
      if (!overrun_logged && now - cancelled_at > wait.overrun) {
        // The thread is joined regardless: say why the agent is stuck.
        DJ_LOG_WARNING("{}: still waiting {} after it was cancelled", wait.what,
                       absl::FormatDuration(now - cancelled_at));
        overrun_logged = true;
      }
      continue;
    }
    if (cancel_at == absl::InfiniteFuture() && wait.stop != nullptr &&
        wait.stop()) {
      cancel_at = now + wait.grace;
    }
    if (now >= wait.deadline && cancel_at > now) {
      DJ_LOG_WARNING("{}: still running at its deadline; cancelled", wait.what);
      cancel_at = now;
    }
    if (now >= cancel_at) {
      wait.cancel();
      cancelled = true;
      cancelled_at = absl::Now();
    }
  }
  waiter.join();
  return cancelled;
}

}  // namespace distjob
