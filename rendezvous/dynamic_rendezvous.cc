#include "rendezvous/dynamic_rendezvous.h"

#include <arpa/inet.h>

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "common/net.h"
#include "common/resolver.h"
#include "rendezvous/join_attempt.h"
#include "rendezvous/protocol_version.h"
#include "rendezvous/worker_store_record.h"

namespace distjob {
namespace {

// What a cancelled rendezvous gives the store to close (Cancel).
constexpr absl::Duration kCancelGoodbyes = absl::Milliseconds(500);

// At most a few names, for a progress line of a job of any size.
std::string NameList(const std::vector<std::string>& names) {
  constexpr size_t kShown = 8;
  if (names.size() <= kShown) return absl::StrJoin(names, ", ");
  return absl::StrCat(
      absl::StrJoin(names.begin(), names.begin() + kShown, ", "), " and ",
      names.size() - kShown, " more");
}

}  // namespace

void DynamicRendezvous::WarnIfLost(absl::string_view what,
                                   const absl::Status& s) {
  if (!s.ok()) DJ_LOG_WARNING("rendezvous: cannot {}: {}", what, s.message());
}

DynamicRendezvous::DynamicRendezvous(DynamicRendezvousOptions options,
                                     std::unique_ptr<StoreInterface> store,
                                     std::shared_ptr<void> keep_alive)
    : options_(std::move(options)),
      keys_(options_.key_run_id.empty() ? options_.run_id
                                        : options_.key_run_id),
      lease_(options_.config.keep_alive_interval *
             options_.config.keep_alive_max_attempt),
      store_(std::move(store)),
      keep_alive_(std::move(keep_alive)),
      node_lease_(store_.get(), &keys_, options_.node, lease_,
                  options_.config.keep_alive_interval) {
  if (options_.heartbeat_thread) {
    heartbeat_ = std::thread([this] { HeartbeatLoop(); });
  }
}

DynamicRendezvous::~DynamicRendezvous() {
  // Ends the monitor's watch in flight, which would otherwise hold the
  // join below for up to a lease; nothing else calls the store any more.
  closed_ = true;
  if (store_ != nullptr) store_->Close();
  StopThreads();
}

void DynamicRendezvous::StopThreads() {
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    stop_ = true;
  }
  if (heartbeat_.joinable()) heartbeat_.join();
  if (monitor_.joinable()) monitor_.join();
}

void DynamicRendezvous::SetOnMembershipChange(std::function<void()> callback) {
  absl::MutexLock lock(&mu_);
  on_change_ = std::move(callback);
}

absl::Time DynamicRendezvous::NextRenewal(absl::Time last_attempt) const {
  return node_lease_.NextRenewal(last_attempt);
}

void DynamicRendezvous::HeartbeatLoop() {
  absl::Time last_attempt = absl::Now();
  for (;;) {
    const absl::Time next = NextRenewal(last_attempt);
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithDeadline(absl::Condition(&stop_), next)) return;
    }
    // A join may have renewed the lease during the wait.
    if (absl::Now() < NextRenewal(last_attempt)) continue;
    last_attempt = absl::Now();
    RenewLease();
  }
}

void DynamicRendezvous::RenewLease() {
  // No store to renew a lease in: its host left, or this node closed it
  // (Shutdown), whose last calls may take a while.
  if (host_left_ || closed_) return;
  const absl::Time start = absl::Now();
  const absl::Status s = node_lease_.Renew();
  if (s.ok()) {
    renew_failing_since_ = absl::InfiniteFuture();
    return;
  }
  renew_failing_since_ = std::min(renew_failing_since_, start);
  const bool joining = wait_status_.Get().wait == Wait::kStore;
  // Not reached yet: Next says so, once per progress interval.
  if (joining) {
    DJ_LOG_DEBUG("rendezvous heartbeat failed: {}", s.message());
    return;
  }
  DJ_LOG_WARNING("rendezvous heartbeat failed: {}", s.message());
  // A store that answers nothing (a hung etcd: its connections up, no
  // replies) can leave the monitor's watch open with no news for as long
  // as the connection lives. The lease it cannot renew is the loss:
  // read_timeout after the first failing renewal began, as a watch's.
  bool in_round;
  {
    absl::MutexLock lock(&mu_);
    in_round = monitoring_;
  }
  if (in_round && !absl::IsUnauthenticated(s) && !absl::IsCancelled(s) &&
      absl::Now() - renew_failing_since_ >= options_.config.read_timeout) {
    store_lost_ = true;
    Fire(absl::StrCat("the rendezvous store is unreachable: ", s.message()));
  }
}

Progress DynamicRendezvous::CurrentProgress(absl::Time deadline,
                                            int64_t announced_round) const {
  Progress p;
  p.now = absl::Now();
  p.deadline = deadline;
  p.cancelled = cancelled_;
  p.store_lost = store_lost_;
  p.min_nodes = options_.min_nodes;
  p.max_nodes = options_.max_nodes;
  p.last_call_timeout = options_.config.last_call_timeout;
  p.keep_alive_interval = options_.config.keep_alive_interval;
  p.last_round = last_round_;
  p.decider_round = decider_round_;
  p.pending_restarts = pending_restarts_;
  p.joined_round = joined_round_;
  p.join_index = join_index_;
  p.join_written = join_written_;
  p.joined_at = joined_at_;
  p.announced_round = announced_round;
  return p;
}

absl::StatusOr<std::string> DynamicRendezvous::ReadRankRecord(
    const RdzvState& st, RankCache* cache) {
  const std::string rank_key = keys_.Rank(st.round, st.closer, options_.node);
  cache->master.reset();
  if (!IsKnownMember(st)) return store_->Get(rank_key, absl::ZeroDuration());
  // With the master's record, which group rank 0 writes once it has seen
  // the close: one request where two would be, as thousands of members
  // read at once. Within close_timeout, as Result's own read.
  ScopedCallDeadline after_join(absl::InfiniteFuture());
  auto both = store_->MultiGet({rank_key, keys_.Master(st.round)},
                               options_.config.close_timeout);
  if (both.ok()) {
    cache->master = std::move((*both)[1]);
    return std::move((*both)[0]);
  }
  if (!absl::IsDeadlineExceeded(both.status())) return both.status();
  // Rank 0 never wrote it: Result fails as its own read would have.
  cache->master = both.status();
  return store_->Get(rank_key, absl::ZeroDuration());
}

Observed DynamicRendezvous::Observe(RankCache* cache,
                                    const std::optional<WatchChange>& known,
                                    int64_t known_revision,
                                    StoreListing* listed) {
  Observed o;
  o.fresh = true;
  if (!ObserveState(known, known_revision, listed, &o)) return o;
  const RdzvState& st = o.state;
  if (st.closed && (st.round != cache->round || st.closer != cache->closer) &&
      !ObserveRank(st, cache, &o)) {
    return o;
  }
  if (st.closed) o.mine = cache->mine;
  if (o.mine.has_value() && st.round == decider_round_) {
    auto alive = store_->Check({keys_.Alive(decider_)});
    if (alive.ok()) o.decider_alive = *alive;
  }
  if (st.closed && !o.mine.has_value()) ObserveMembersAlive(st, &o);
  return o;
}

bool DynamicRendezvous::ObserveState(const std::optional<WatchChange>& known,
                                     int64_t known_revision,
                                     StoreListing* listed, Observed* o) {
  if (known.has_value() && known->key == keys_.State() &&
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
                     : store_->List(keys_.State());
  if (!listing.ok()) {
    o->state_error = listing.status();
    return false;
  }
  for (auto& e : listing->entries) {
    if (e.key == keys_.Aborted()) {
      o->aborted = std::move(e.value);
      return false;
    }
  }
  o->revision = listing->revision;
  for (const auto& e : listing->entries) {
    if (e.key != keys_.State()) continue;
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

bool DynamicRendezvous::ObserveRank(const RdzvState& st, RankCache* cache,
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

void DynamicRendezvous::ObserveMembersAlive(const RdzvState& st, Observed* o) {
  auto members = ReadMembers(st.round, st.closer, st.size);
  auto alive = store_->List(keys_.AlivePrefix());
  if (!members.ok() || !alive.ok()) return;
  std::set<std::string> live;
  for (const auto& e : alive->entries) live.insert(e.key);
  bool any_alive = false;
  absl::MutexLock lock(&seen_mu_);
  last_seen_.clear();
  for (const auto& p : *members) {
    any_alive |= live.count(keys_.Alive(p.node)) > 0;
    last_seen_.push_back(p.addr);
  }
  o->members_alive = any_alive;
}

absl::Status DynamicRendezvous::CheckProtocolOnce() {
  if (protocol_checked_) return absl::OkStatus();
  absl::Status s =
      CheckRdzvProtocol(store_.get(), keys_.Protocol(), RdzvProtocolVersion());
  protocol_checked_ = s.ok();
  return s;
}

absl::StatusOr<RendezvousResult> DynamicRendezvous::Next(int local_world_size) {
  return JoinAttempt(this, local_world_size).Run();
}

RdzvState DynamicRendezvous::CloseState(const RdzvState& open) const {
  RdzvState next = open;
  next.closed = true;
  next.closer = options_.node;
  next.size = closing_size_;
  next.world_size = closing_world_;
  next.leader = closing_leader_;
  return next;
}

bool DynamicRendezvous::CloseStillWritten(const RdzvState& st) {
  if (closing_round_ != st.round || !closing_by_index_) return false;
  auto joined = store_->Add(keys_.Joined(st.round), 0);
  return joined.ok() &&
         std::min<int64_t>(*joined, options_.max_nodes) == closing_joined_;
}

absl::Status DynamicRendezvous::Close(const RdzvState& st, bool ahead) {
  bool by_index = false;
  int64_t counted = 0;
  closing_round_ = -1;
  auto members = Joined(st.round, &by_index, &counted, !ahead);
  if (!members.ok()) return members.status();
  // Written by the store's host before it serves anyone.
  std::string host;
  if (auto h = store_->Get(keys_.Host(), absl::ZeroDuration()); h.ok()) {
    host = *h;
  }
  std::vector<std::string> previous;
  if (st.prev_round >= 0) {
    // Read once, by the one or two nodes that close a round.
    auto prev = ReadMembers(st.prev_round, st.prev_closer, st.prev_size);
    if (prev.ok()) {
      for (const auto& p : *prev) previous.push_back(p.node);
    }
  }
  AssignRanks(host, previous, &*members);
  // The records go in before the compare-set that closes the round: a
  // node that sees it closed finds its own.
  closing_world_ = 0;
  for (const auto& p : *members) closing_world_ += p.nproc;
  closing_size_ = static_cast<int>(members->size());
  closing_leader_ = by_index && !members->empty() ? (*members)[0].node : "";
  // Under the store's keys and bytes per request: a chunk of the member
  // list is at most kMemberChunkBytes, a rank record a few dozen bytes.
  constexpr size_t kKeysPerRequest = 1024;
  constexpr size_t kBytesPerRequest = size_t{1} << 20;
  std::vector<std::pair<std::string, std::string>> kvs;
  size_t bytes = 0;
  auto flush = [&]() -> absl::Status {
    if (kvs.empty()) return absl::OkStatus();
    auto s = store_->MultiSet(kvs, absl::ZeroDuration());
    kvs.clear();
    bytes = 0;
    return s.status();
  };
  auto put = [&](std::string key, std::string value) -> absl::Status {
    if (kvs.size() == kKeysPerRequest ||
        bytes + key.size() + value.size() > kBytesPerRequest) {
      if (auto s = flush(); !s.ok()) return s;
    }
    bytes += key.size() + value.size();
    kvs.emplace_back(std::move(key), std::move(value));
    return absl::OkStatus();
  };
  for (auto& [first, text] : EncodeMemberChunks(*members)) {
    if (auto s =
            put(keys_.Members(st.round, options_.node, first), std::move(text));
        !s.ok()) {
      return s;
    }
  }
  for (auto& [node, rec] : RankRecords(*members)) {
    if (auto s =
            put(keys_.Rank(st.round, options_.node, node), EncodeRank(rec));
        !s.ok()) {
      return s;
    }
  }
  if (auto s = flush(); !s.ok()) return s;
  closing_round_ = st.round;
  closing_joined_ = counted;
  closing_by_index_ = by_index;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RdzvParticipant>> DynamicRendezvous::ReadMembers(
    int64_t round, const std::string& closer, int size) {
  // A few chunks, a page or two of a listing even at 100,000 members.
  auto listing = store_->List(keys_.MembersPrefix(round, closer));
  if (!listing.ok()) return listing.status();
  std::vector<std::pair<int64_t, std::string>> chunks;
  for (auto& e : listing->entries) {
    if (auto first = keys_.ParseMembers(e.key, round, closer);
        first.has_value()) {
      chunks.emplace_back(*first, std::move(e.value));
    }
  }
  return AssembleMembers(std::move(chunks), size);
}

namespace {

// Keeps the first record of each node; whether any was dropped.
bool DropRepeatedNodes(std::vector<RdzvParticipant>* members) {
  std::set<std::string> seen;
  const size_t before = members->size();
  members->erase(std::remove_if(members->begin(), members->end(),
                                [&seen](const RdzvParticipant& p) {
                                  return !seen.insert(p.node).second;
                                }),
                 members->end());
  return members->size() != before;
}

}  // namespace

absl::StatusOr<std::vector<RdzvParticipant>> DynamicRendezvous::Joined(
    int64_t round, bool* by_index, int64_t* counted, bool wait_for_records) {
  *by_index = false;
  auto joined = store_->Add(keys_.Joined(round), 0);
  if (!joined.ok()) return joined.status();
  const int64_t n = std::min<int64_t>(*joined, options_.max_nodes);
  if (counted != nullptr) *counted = n;
  std::vector<RdzvParticipant> members;
  // A node counted but not yet written is on its way: the blocking read
  // waits for it, at most one lease (it may have died in between).
  constexpr int64_t kChunk = 1024;  // under the store's keys per request
  bool complete = true;
  for (int64_t first = 1; complete && first <= n; first += kChunk) {
    std::vector<std::string> keys;
    for (int64_t i = first; i < first + kChunk && i <= n; ++i) {
      keys.push_back(keys_.Join(round, i));
    }
    auto values = store_->MultiGet(
        keys, wait_for_records ? lease_ : absl::ZeroDuration());
    complete = values.ok();
    for (size_t i = 0; complete && i < values->size(); ++i) {
      auto p = DecodeJoin((*values)[i]);
      if (!p.ok()) return p.status();
      members.push_back(*std::move(p));
    }
  }
  if (complete) {
    // A join whose answer was lost and that was made again left the node
    // at two places: it counts once, at the first, and the places no
    // longer name the members.
    *by_index = !DropRepeatedNodes(&members);
    return members;
  }
  // Someone never wrote its record: the round closes with those who did.
  auto listing = store_->List(keys_.JoinPrefix(round));
  if (!listing.ok()) return listing.status();
  std::vector<std::pair<int64_t, RdzvParticipant>> indexed;
  for (const auto& e : listing->entries) {
    const std::optional<int64_t> i = keys_.ParseJoin(e.key, round);
    if (!i.has_value() || *i > n) continue;
    auto p = DecodeJoin(e.value);
    if (!p.ok()) return p.status();
    indexed.emplace_back(*i, *std::move(p));
  }
  std::sort(indexed.begin(), indexed.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  members.clear();
  for (auto& [i, p] : indexed) members.push_back(std::move(p));
  DropRepeatedNodes(&members);
  return members;
}

bool DynamicRendezvous::IsKnownMember(const RdzvState& st) const {
  return st.closed && !st.leader.empty() && st.leader != options_.node &&
         joined_round_ == st.round && join_written_ && join_index_ >= 1 &&
         join_index_ <= st.size;
}

absl::StatusOr<RendezvousResult> DynamicRendezvous::Result(
    const RdzvState& st, const RankRecord& mine, int64_t revision,
    const std::optional<absl::StatusOr<std::string>>& master) {
  RendezvousResult r;
  r.round = st.round;
  r.group_rank = mine.group_rank;
  r.group_world_size = st.size;
  r.base_rank = mine.base_rank;
  r.world_size = st.world_size;
  r.run_id = options_.run_id;
  r.restart_count = st.restart_count;
  if (absl::Status s = mine.group_rank == 0 ? WriteMaster(st, &r)
                                            : ReadMaster(st, master, &r);
      !s.ok()) {
    return s;
  }
  last_round_ = st.round;
  DJ_LOG_INFO(
      "round {} of '{}': group rank {} of {} nodes, first global rank {} of "
      "{}, master {}:{}, restarts {}",
      st.round, options_.run_id, r.group_rank, r.group_world_size, r.base_rank,
      r.world_size, r.master_addr, r.master_port, st.restart_count);
  HoldRound(st, mine, revision);
  return r;
}

absl::StatusOr<int> DynamicRendezvous::MasterPort(const RdzvState& st,
                                                  WorkerStoreRecord* record) {
  if (options_.worker_store == nullptr) {
    if (options_.worker_store_port != 0) return options_.worker_store_port;
    // A name may not resolve inside a static binary (no NSS): probe the
    // wildcard address then; the port is free on every interface.
    const std::string bind =
        IsIpLiteral(options_.addr) ? options_.addr : "0.0.0.0";
    return FindFreePort(bind);
  }
  auto members = ReadMembers(st.round, st.closer, st.size);
  if (!members.ok()) return members.status();
  std::vector<std::string> addrs;
  for (const RdzvParticipant& m : *members) addrs.push_back(m.addr);
  MemberAdmission admission;
  if (absl::Status s = options_.worker_store->AllowMembers(
          addrs, options_.config.worker_store_resolve_timeout,
          [this] { return cancelled_.load(); }, &admission);
      !s.ok()) {
    return s;
  }
  record->members_only = admission.members_only;
  record->admitted = admission.admitted;
  record->unresolved = static_cast<int64_t>(admission.unresolved.size());
  absl::StatusOr<int> port =
      options_.worker_store->Serve(options_.addr, options_.worker_store_port);
  // Every member stopped its last workers before it joined this round,
  // and none learns the address before the master record below: a clean
  // store for the new group, whose key prefix may be the last one's.
  if (port.ok()) {
    if (absl::Status s = options_.worker_store->Clear(); !s.ok()) return s;
  }
  return port;
}

absl::Status DynamicRendezvous::WriteMaster(const RdzvState& st,
                                            RendezvousResult* r) {
  WorkerStoreRecord record;
  record.round = st.round;
  record.opted_out_by = options_.worker_store_off;
  absl::StatusOr<int> port = MasterPort(st, &record);
  if (!port.ok()) return port.status();
  r->master_addr = options_.addr;
  r->master_port = *port;
  r->use_agent_store = options_.worker_store != nullptr;
  record.agent = r->use_agent_store;
  record.addr = JoinHostPort(r->master_addr, r->master_port);
  // The third field tells the other nodes' workers to be the store's
  // clients: rank 0 decides for the whole round, so a node started with
  // another --worker-store cannot split the workers.
  std::string master = absl::StrCat(r->master_port, " ", r->master_addr,
                                    r->use_agent_store ? " agent-store" : "");
  const std::string master_key = keys_.Master(st.round);
  // With the workers' store record, for `status` (once a worker connects
  // it shows who to): one request, since every other member's read of
  // the master record waits for it. Only `status` reads that record, so
  // a write that fails for it still writes the master record alone.
  auto both =
      store_->MultiSet({{keys_.WorkerStore(), EncodeWorkerStoreRecord(record)},
                        {master_key, master}},
                       absl::ZeroDuration());
  if (!both.ok()) {
    DJ_LOG_WARNING(
        "cannot write the master record with the workers' store record "
        "(for status): {}; writing the master record alone",
        both.status().message());
    auto s = store_->Set(master_key, master);
    if (!s.ok()) return s.status();
  }
  return absl::OkStatus();
}

absl::Status DynamicRendezvous::ReadMaster(
    const RdzvState& st,
    const std::optional<absl::StatusOr<std::string>>& master,
    RendezvousResult* r) {
  // Not rank 0 (any more): the workers' store is the new rank 0's.
  if (options_.worker_store != nullptr) options_.worker_store->Stop();
  auto v = master.has_value() ? *master
                              : store_->Get(keys_.Master(st.round),
                                            options_.config.close_timeout);
  if (!v.ok()) return v.status();
  const std::vector<std::string> fields =
      absl::StrSplit(*v, ' ', absl::SkipEmpty());
  if (fields.size() < 2 || fields.size() > 3 ||
      !absl::SimpleAtoi(fields[0], &r->master_port) ||
      (fields.size() == 3 && fields[2] != "agent-store")) {
    return absl::DataLossError(
        absl::StrCat("malformed master record '", *v, "'"));
  }
  r->master_addr = fields[1];
  r->use_agent_store = fields.size() == 3;
  return absl::OkStatus();
}

void DynamicRendezvous::HoldRound(const RdzvState& st, const RankRecord& mine,
                                  int64_t revision) {
  {
    absl::MutexLock lock(&mu_);
    current_ = st;
    current_rank_ = mine;
    watched_peer_ = mine.next;
  }
  // The monitor's watch starts from the revision the round was closed at:
  // a change made since (a fast peer's worker failed and opened the next
  // round while this node was still reading the one that closed, a node
  // asked to join, the next member's lease ran out) fires at once. A node
  // asks to join only once it saw the round closed (or full), so this
  // needs no listing of the waiting nodes per member, which a recovery's
  // survivors all made at once.
  {
    absl::MutexLock lock(&mu_);
    current_revision_ = revision;
    monitoring_ = !abandoned_;
    ++monitor_generation_;
    if (!stop_ && !monitor_.joinable()) {
      monitor_ = std::thread([this] { MonitorLoop(); });
    }
  }
}

std::string DynamicRendezvous::WaitingNode() {
  auto waiting = store_->List(keys_.WaitingPrefix());
  if (!waiting.ok()) return "";
  for (const auto& e : waiting->entries) {
    if (auto node = keys_.ParseWaiting(e.key); node.has_value()) {
      return absl::StrCat("node ", *node, " waits to join");
    }
  }
  return "";
}

void DynamicRendezvous::NoteJoinedAddrs(int64_t round) {
  auto listing = store_->List(keys_.JoinPrefix(round));
  if (!listing.ok()) return;
  absl::MutexLock lock(&seen_mu_);
  last_seen_.clear();
  for (const auto& e : listing->entries) {
    auto p = DecodeJoin(e.value);
    if (p.ok() && std::find(last_seen_.begin(), last_seen_.end(), p->addr) ==
                      last_seen_.end()) {
      last_seen_.push_back(p->addr);
    }
  }
}

std::vector<std::string> DynamicRendezvous::LastSeenAddrs() const {
  absl::MutexLock lock(&seen_mu_);
  return last_seen_;
}

void DynamicRendezvous::Cancel() {
  cancelled_ = true;
  closed_ = true;
  // Ends the calls in flight. Its own goodbyes (etcd revokes this node's
  // leases) get half a second: a stop must end the agent within its grace
  // period whatever the store does, and a lease not revoked runs out.
  ScopedCallDeadline brief(absl::Now() + kCancelGoodbyes);
  store_->Close();
}

std::string DynamicRendezvous::Unfinished(const RdzvState& round) {
  auto members = ReadMembers(round.round, round.closer, round.size);
  auto marks = store_->List(keys_.DonePrefix(round.round));
  if (!members.ok() || !marks.ok()) return "";
  std::set<std::string> marked;
  for (const auto& e : marks->entries) {
    if (auto node = keys_.ParseDone(e.key, round.round); node.has_value()) {
      marked.insert(*node);
    }
  }
  std::vector<std::string> missing;
  for (const RdzvParticipant& p : *members) {
    if (p.node != options_.node && !marked.count(p.node)) {
      missing.push_back(p.node);
    }
  }
  return NameList(missing);
}

std::string DynamicRendezvous::WaitingFor() {
  const WaitStatus::Snapshot now = wait_status_.Get();
  const int64_t round = now.round;
  // One short read for the count: the store may be what does not answer.
  ScopedCallDeadline quick(absl::Now() + absl::Milliseconds(300));
  // A read, not Add(key, 0): a diagnostic must not write (a write wakes
  // every watcher of the prefix and would create a missing counter).
  auto count = [&](const std::string& key) -> std::string {
    auto v = store_->Get(key, absl::ZeroDuration());
    if (absl::IsNotFound(v.status())) return "0";
    int64_t n = 0;
    return v.ok() && absl::SimpleAtoi(*v, &n) ? absl::StrCat(n) : "?";
  };
  const std::string up_to = options_.min_nodes < options_.max_nodes
                                ? absl::StrCat(", up to ", options_.max_nodes)
                                : "";
  switch (now.wait) {
    case Wait::kNone:
      return "";
    case Wait::kStore:
      return "the rendezvous store (not reachable yet)";
    case Wait::kJoiners:
      // Also for LastSeenAddrs: who is missing from the round.
      NoteJoinedAddrs(round);
      return absl::StrCat("the rendezvous round ", round, " (",
                          count(keys_.Joined(round)), "/", options_.min_nodes,
                          " nodes joined", up_to, ")");
    case Wait::kLastCall:
      return absl::StrCat("the last call of rendezvous round ", round, " (",
                          count(keys_.Joined(round)), " nodes joined", up_to,
                          ")");
    case Wait::kNextRound:
      return absl::StrCat("the next rendezvous round (round ", round,
                          " is closed or full)");
    case Wait::kDecider:
      return absl::StrCat("node ", now.node, " to restart or end the job");
    case Wait::kExitBarrier:
      return absl::StrCat("the exit barrier of round ", round, " (",
                          count(keys_.DoneCount(round)), "/", now.size,
                          " nodes finished)");
    case Wait::kLeft:
      return "the other nodes to read the exit barrier's outcome";
    case Wait::kEndSeen:
      return "the other nodes to read why the job ended";
    case Wait::kHostLeaving:
      return "the nodes still running to read that the store's host leaves";
  }
  return "";
}

std::string DynamicRendezvous::WaitProgress() {
  std::string line = WaitingFor();
  if (line.empty()) return line;
  const WaitStatus::Snapshot now = wait_status_.Get();
  const int64_t round = now.round;
  ScopedCallDeadline quick(absl::Now() + absl::Milliseconds(300));
  std::string detail;
  switch (now.wait) {
    case Wait::kStore:
      detail = now.store_error;
      break;
    case Wait::kJoiners:
    case Wait::kLastCall:
      NoteJoinedAddrs(round);
      detail = NameList(LastSeenAddrs());
      if (!detail.empty()) detail = absl::StrCat("joined: ", detail);
      break;
    case Wait::kExitBarrier: {
      RdzvState current;
      {
        absl::MutexLock lock(&mu_);
        current = current_;
      }
      if (current.round == round) detail = Unfinished(current);
      if (!detail.empty()) detail = absl::StrCat("not finished: ", detail);
      break;
    }
    default:
      break;
  }
  if (!detail.empty()) absl::StrAppend(&line, "; ", detail);
  if (now.until != absl::InfiniteFuture()) {
    absl::StrAppend(
        &line, "; until ",
        absl::FormatTime("%H:%M:%S UTC", now.until, absl::UTCTimeZone()));
  }
  return line;
}

}  // namespace distjob
