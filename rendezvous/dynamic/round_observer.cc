#include "rendezvous/dynamic/round_observer.h"

#include <set>
#include <utility>
#include <vector>

#include "rendezvous/dynamic/round_members.h"

namespace distjob {

RoundObserver::RoundObserver(Deps deps) : d_(std::move(deps)) {}

absl::StatusOr<std::string> RoundObserver::ReadRankRecord(const RdzvState& st,
                                                          RankCache* cache) {
  const std::string rank_key = d_.keys->Rank(st.round, st.closer, d_.node);
  cache->master.reset();
  if (!IsKnownMember(st)) return d_.store->Get(rank_key, absl::ZeroDuration());
  // With the master's record, which group rank 0 writes once it has seen
  // the close: one request where two would be, as thousands of members
  // read at once. Within close_timeout, as Result's own read.
  ScopedCallDeadline after_join(absl::InfiniteFuture());
  auto both = d_.store->MultiGet({rank_key, d_.keys->Master(st.round)},
                                 d_.close_timeout);
  if (both.ok()) {
    cache->master = std::move((*both)[1]);
    return std::move((*both)[0]);
  }
  if (!absl::IsDeadlineExceeded(both.status())) return both.status();
  // Rank 0 never wrote it: Result fails as its own read would have.
  cache->master = both.status();
  return d_.store->Get(rank_key, absl::ZeroDuration());
}

Observed RoundObserver::Observe(RankCache* cache,
                                const std::optional<WatchChange>& known,
                                int64_t known_revision, StoreListing* listed) {
  Observed o;
  o.fresh = true;
  if (!ObserveState(known, known_revision, listed, &o)) return o;
  const RdzvState& st = o.state;
  if (st.closed && (st.round != cache->round || st.closer != cache->closer) &&
      !ObserveRank(st, cache, &o)) {
    return o;
  }
  if (st.closed) o.mine = cache->mine;
  if (o.mine.has_value() && st.round == d_.failure->decider_round()) {
    auto alive = d_.store->Check({d_.keys->Alive(d_.failure->decider())});
    if (alive.ok()) o.decider_alive = *alive;
  }
  if (st.closed && !o.mine.has_value()) ObserveMembersAlive(st, &o);
  return o;
}

bool RoundObserver::ObserveState(const std::optional<WatchChange>& known,
                                 int64_t known_revision, StoreListing* listed,
                                 Observed* o) {
  if (known.has_value() && known->key == d_.keys->State() &&
      known->value.has_value()) {
    if (auto st = RdzvState::Decode(*known->value); st.ok()) {
      // What the watch said: a recovery's survivors, woken together by the
      // round's close, each skip a listing.
      o->revision = known_revision;
      o->state_revision = known->revision;
      o->raw = *known->value;
      o->state = *std::move(st);
      return true;
    }
  }
  // One request for the state and the job's end (rdzv_keys.h: both start
  // with the state's key), read by every node on every wake-up.
  auto listing = listed != nullptr
                     ? absl::StatusOr<StoreListing>(std::move(*listed))
                     : d_.store->List(d_.keys->State());
  if (!listing.ok()) {
    o->state_error = listing.status();
    return false;
  }
  for (auto& e : listing->entries) {
    if (e.key == d_.keys->Aborted()) {
      o->aborted = std::move(e.value);
      return false;
    }
  }
  o->revision = listing->revision;
  for (const auto& e : listing->entries) {
    if (e.key != d_.keys->State()) continue;
    o->raw = e.value;
    o->state_revision = e.revision;
    auto st = RdzvState::Decode(e.value);
    if (!st.ok()) {
      o->state_error = st.status();
      return false;
    }
    o->state = std::move(*st);
  }
  return true;
}

bool RoundObserver::ObserveRank(const RdzvState& st, RankCache* cache,
                                Observed* o) {
  auto rec = ReadRankRecord(st, cache);
  if (!rec.ok() && !absl::IsNotFound(rec.status())) {
    o->rank_error = rec.status();
    return false;
  }
  cache->mine.reset();
  if (rec.ok()) {
    auto r = DecodeRank(*rec);
    if (!r.ok()) {
      o->malformed = r.status();
      return false;
    }
    cache->mine = *std::move(r);
  }
  cache->round = st.round;
  cache->closer = st.closer;
  return true;
}

void RoundObserver::ObserveMembersAlive(const RdzvState& st, Observed* o) {
  auto members =
      ReadRoundMembers(d_.store, *d_.keys, st.round, st.closer, st.size);
  auto alive = d_.store->List(d_.keys->AlivePrefix());
  if (!members.ok() || !alive.ok()) return;
  std::set<std::string> live;
  for (const auto& e : alive->entries) live.insert(e.key);
  bool any_alive = false;
  std::vector<std::string> addrs;
  for (const auto& p : *members) {
    any_alive |= live.count(d_.keys->Alive(p.node)) > 0;
    addrs.push_back(p.addr);
  }
  d_.report->SetLastSeen(std::move(addrs));
  o->members_alive = any_alive;
}

bool RoundObserver::IsKnownMember(const RdzvState& st) const {
  return st.closed && !st.leader.empty() && st.leader != d_.node &&
         d_.join->joined_round == st.round && d_.join->join_written &&
         d_.join->join_index >= 1 && d_.join->join_index <= st.size;
}

}  // namespace distjob
