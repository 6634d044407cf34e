// How the supervisor runs one attempt of the worker group: which signals
// stop it, how long workers get to exit, and the hang watchdog. Filled by
// agent/cli/supervisor_flags.cc; the supervisor reads nothing else.
#ifndef DISTJOB_SUPERVISOR_SUPERVISOR_OPTIONS_H_
#define DISTJOB_SUPERVISOR_SUPERVISOR_OPTIONS_H_

#include <csignal>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace distjob {

struct SupervisorOptions {
  // Signals that start a shutdown (all catchable ones are forwarded).
  std::vector<int> stop_signals = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
  // From the forwarded stop signal to SIGKILL. Below Kubernetes' default
  // terminationGracePeriodSeconds (30 s) so the kubelet never has to.
  absl::Duration shutdown_timeout = absl::Seconds(25);
  // Hang watchdog: a worker whose heartbeat file is older than
  // hang_timeout (or absent first_heartbeat_timeout after its start) is a
  // retryable failure. Zero hang_timeout disables it; zero
  // first_heartbeat_timeout means twice hang_timeout.
  absl::Duration hang_timeout = absl::ZeroDuration();
  absl::Duration first_heartbeat_timeout = absl::ZeroDuration();
  int hang_signal = 0;  // sent first, for a stack dump; 0 = none
  // A worker that has already recorded its error (torchelastic's error
  // file) when its group is stopped is exiting on its own: it gets this long
  // (at most the shutdown timeout) before the stop signal, so its exit code
  // is its own and not the agent's SIGTERM.
  absl::Duration exit_grace = absl::Seconds(2);
  // torch's FileTimer (--file-timer, TORCHELASTIC_ENABLE_FILE_TIMER): the
  // FIFO the supervisor creates and serves, its path fixed when the options
  // are parsed (TORCHELASTIC_TIMER_FILE, else a fresh name in the temporary
  // directory). A worker pid whose timer expires gets the timer's signal,
  // and its group is handled as hung.
  bool file_timer = false;
  std::string file_timer_path;
  // Evidence before every stop or kill the agent decides (threads' kernel
  // states, the workers' own servers): at most this long, never past the
  // grace period; zero collects none.
  absl::Duration evidence_budget = absl::Seconds(5);
  // Where /proc is: a fake tree in tests of D-state reporting.
  std::string proc_root = "/proc";
  // fnmatch(3) patterns of the device files that pin an accelerator
  // (--device-files; empty: DeviceFenceOptions' usual ones). The drain
  // names the ones a leftover it kills holds; the fence between attempts
  // waits for them.
  std::vector<std::string> device_patterns;
};

}  // namespace distjob

#endif  // DISTJOB_SUPERVISOR_SUPERVISOR_OPTIONS_H_
