// How a DynamicRendezvous node sees its round end while its workers run:
// one watcher thread per agent watches what tells that the round it holds
// stopped being the job's (the state keys, the waiting nodes and the
// lease of its next live member in rank order, so that neither a round's
// own traffic nor another member's lost lease wakes it), judges what it
// saw, and fires the membership-change callback. A wake-up costs no read
// when the store says what changed, a few small ones otherwise, whatever
// the job's size.
//
// It keeps the round the node holds and what it saw of the job (the end,
// a reopened round) under a lock of its own: Next reads them at its start,
// Shutdown at the node's end, the failure claim for the round's number.
#ifndef DISTJOB_RENDEZVOUS_DYNAMIC_ROUND_MONITOR_H_
#define DISTJOB_RENDEZVOUS_DYNAMIC_ROUND_MONITOR_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rendezvous/dynamic/exit_barrier.h"
#include "rendezvous/rdzv_keys.h"
#include "rendezvous/rdzv_state.h"
#include "rendezvous/store/store_interface.h"

namespace distjob {

class RoundMonitor {
 public:
  // What it uses of the facade; every pointer outlives the monitor.
  struct Deps {
    StoreInterface* store = nullptr;
    const RdzvKeys* keys = nullptr;
    std::string node;      // this node
    bool hosting = false;  // this node's agent hosts the store
    int max_nodes = 1;
    absl::Duration read_timeout;
    absl::Duration keep_alive_interval;
    absl::Duration lease;
    // Acknowledges the job's end it reads.
    ExitBarrier* exit = nullptr;
    // The flags the facade, its join and its exit share: set here when
    // the store is lost (store_lost), when the store's host announced it
    // leaves (host_left) and when the round changed (changed); read here:
    // this node closed its store view (closed).
    std::atomic<bool>* store_lost = nullptr;
    std::atomic<bool>* host_left = nullptr;
    std::atomic<bool>* changed = nullptr;
    const std::atomic<bool>* closed = nullptr;
  };
  // What the monitor saw since the last Next, taken by it (Pause).
  struct Seen {
    // The state that reopened the round (its one change since this node's
    // round closed), for Next's first read, and its revision.
    std::optional<WatchChange> reopened;
    int64_t reopened_revision = 0;
    // Why another node ended the job, once seen ("": it did not).
    std::string aborted;
    // The round this node holds (or last held).
    RdzvState current;
  };

  explicit RoundMonitor(Deps deps);
  ~RoundMonitor();  // Stop
  RoundMonitor(const RoundMonitor&) = delete;
  RoundMonitor& operator=(const RoundMonitor&) = delete;

  // Called (on the monitor's thread) when the round it watches ends.
  void SetOnChange(std::function<void()> callback);
  // Makes closed round `st` the one this node holds (`mine`: its rank
  // record in it), and watches it from `revision`, the close's; starts the
  // watcher thread with the first round.
  void Hold(const RdzvState& st, const RankRecord& mine, int64_t revision);
  // Stops judging the round held (Next begins, the node leaves) and takes
  // what was seen.
  Seen Pause();
  // Stops for good, with no callback (rendezvous.h's Abandon).
  void Abandon();
  bool abandoned() const;
  // Whether it watches a round now.
  bool monitoring() const;
  // The round this node holds (or last held).
  RdzvState current() const;
  // Why another node ended the job ("": not seen), and Next's own read
  // of it.
  std::string aborted() const;
  void SetAborted(std::string why);
  // The round changed (`why`): said once per round held, with the callback.
  void Fire(const std::string& why);
  // Ends the watcher thread (its watch in flight ends once the facade
  // closed the store); idempotent.
  void Stop();

 private:
  void Loop();
  // The watch failed with `s` (the call began at `call_start`): it stops
  // monitoring, or the failure counts towards the store's loss
  // (read_timeout after `*failing_since`, the first failing call's start).
  void OnWatchFailed(const absl::Status& s, absl::Time call_start,
                     absl::Time* failing_since);
  // The watch (of generation `generation`) saw `w`: judged, and a change
  // of the round fired.
  void OnChange(const WatchResult& w, uint64_t generation);
  // Why the current round is no longer the job's, or "" if it still is;
  // sets `revision` to the store revision it read at. With `liveness` it
  // also looks at the next live member's lease and, that member lost,
  // opens the next round (only this node sees the loss).
  // `change`: what woke the monitor, when the store told it; a change that
  // tells all is judged without a read.
  std::string Judge(bool liveness, int64_t* revision,
                    const std::optional<WatchChange>& change = std::nullopt);
  // Judge's verdict from `change` alone, when it tells all (the round
  // reopened, the job ended, a node asks to join, a lease renewed);
  // nullopt: Judge reads. `revision`: the store's, where the watch saw it.
  std::optional<std::string> JudgeChange(const WatchChange& change,
                                         const RdzvState& current,
                                         const std::string& watched,
                                         int64_t revision);
  // Judge's liveness look: the lease of the next live member of `current`
  // after this node in rank order; a lost one opens the next round over
  // `state_raw` (the state as read).
  std::string JudgeRing(const RdzvState& current, const RankRecord& mine,
                        const std::string& state_raw);
  // Why a node outside the round waits to join ("node X waits to join"),
  // or "" when none does.
  std::string WaitingNode();
  // The prefixes watched for the round held.
  std::vector<std::string> Prefixes();

  const Deps d_;
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool monitoring_ ABSL_GUARDED_BY(mu_) = false;
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;  // see Abandon
  std::function<void()> on_change_ ABSL_GUARDED_BY(mu_);
  RdzvState current_ ABSL_GUARDED_BY(mu_);
  RankRecord current_rank_ ABSL_GUARDED_BY(mu_);
  // The member whose lease is watched: the first after this node in rank
  // order still alive when last looked ("": none).
  std::string watched_peer_ ABSL_GUARDED_BY(mu_);
  std::optional<WatchChange> reopened_ ABSL_GUARDED_BY(mu_);
  int64_t reopened_revision_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t current_revision_ ABSL_GUARDED_BY(mu_) = 0;
  // Counts the rounds the monitor was started for: a watch begun for an
  // earlier round (it lasts up to a lease) is not judged against this one.
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  // Why another node ended the job, once seen: the store may be gone (its
  // host ended it) by the time Next runs.
  std::string aborted_ ABSL_GUARDED_BY(mu_);
  // Started with the first round held (a node that never holds one has
  // nothing to watch), under mu_, never after stop_.
  std::thread thread_;
};

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_DYNAMIC_ROUND_MONITOR_H_
