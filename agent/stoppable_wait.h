// A wait that a stop signal ends: the agent loop's rendezvous calls and the
// start barrier run their blocking step on a thread of its own while the
// calling thread watches for the stop, and cancel the step when it comes.
#ifndef DISTJOB_AGENT_STOPPABLE_WAIT_H_
#define DISTJOB_AGENT_STOPPABLE_WAIT_H_

#include <functional>
#include <string>

#include "absl/time/time.h"
#include "common/progress_log.h"

namespace distjob {

struct StoppableWait {
  // What is waited for, for the log ("the rendezvous round").
  std::string what;
  // The blocking step, run on a thread of its own.
  std::function<void()> step;
  // Polled on the calling thread until it first returns true (a stop was
  // asked); null: never.
  std::function<bool()> stop;
  // From the stop to the cancel: time for the step to end on its own.
  absl::Duration grace = absl::ZeroDuration();
  // The step is cancelled at this time, stop or not: the bound of a wait
  // whose own deadline is checked between calls, so that a dependency that
  // hangs (a store that accepts and never answers) cannot stretch it.
  absl::Time deadline = absl::InfiniteFuture();
  // Called once, `grace` after the stop; must make `step` return.
  std::function<void()> cancel;
  // How often `stop` is polled, and so how late a stop is acted on.
  absl::Duration poll = absl::Milliseconds(50);
  // A step still running this long after `cancel` is logged (once), as a
  // cancel that did not reach it.
  absl::Duration overrun = absl::Seconds(1);
  // While the step runs, asked once per `progress_interval` (on the
  // calling thread) what is still awaited: who joined, who is missing,
  // until when. A non-empty answer is logged at info, so no wait is
  // silent; null: `what` is logged.
  std::function<std::string()> progress;
  absl::Duration progress_interval = ProgressInterval();
};

// Runs `wait.step` to its end; returns whether `wait.cancel` was called
// (on a stop, or at `wait.deadline`).
bool RunStoppable(const StoppableWait& wait);

}  // namespace distjob

#endif  // DISTJOB_AGENT_STOPPABLE_WAIT_H_
