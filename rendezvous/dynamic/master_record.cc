#include "rendezvous/dynamic/master_record.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "common/net.h"
#include "common/resolver.h"
#include "rendezvous/dynamic/round_members.h"
#include "rendezvous/worker_store_record.h"

namespace distjob {

MasterRecord::MasterRecord(Deps deps) : d_(std::move(deps)) {}

absl::StatusOr<int> MasterRecord::Port(const RdzvState& st,
                                       WorkerStoreRecord* record) {
  if (d_.worker_store == nullptr) {
    if (d_.worker_store_port != 0) return d_.worker_store_port;
    // A name may not resolve inside a static binary (no NSS): probe the
    // wildcard address then; the port is free on every interface.
    const std::string bind = IsIpLiteral(d_.addr) ? d_.addr : "0.0.0.0";
    return FindFreePort(bind);
  }
  auto members =
      ReadRoundMembers(d_.store, *d_.keys, st.round, st.closer, st.size);
  if (!members.ok()) return members.status();
  std::vector<std::string> addrs;
  for (const RdzvParticipant& m : *members) addrs.push_back(m.addr);
  MemberAdmission admission;
  if (absl::Status s = d_.worker_store->AllowMembers(
          addrs, d_.worker_store_resolve_timeout,
          [this] { return d_.cancelled->load(); }, &admission);
      !s.ok()) {
    return s;
  }
  record->members_only = admission.members_only;
  record->admitted = admission.admitted;
  record->unresolved = static_cast<int64_t>(admission.unresolved.size());
  absl::StatusOr<int> port =
      d_.worker_store->Serve(d_.addr, d_.worker_store_port);
  // Every member stopped its last workers before it joined this round,
  // and none learns the address before the master record below: a clean
  // store for the new group, whose key prefix may be the last one's.
  if (port.ok()) {
    if (absl::Status s = d_.worker_store->Clear(); !s.ok()) return s;
  }
  return port;
}

absl::Status MasterRecord::Write(const RdzvState& st, RendezvousResult* r) {
  WorkerStoreRecord record;
  record.round = st.round;
  record.opted_out_by = d_.worker_store_off;
  absl::StatusOr<int> port = Port(st, &record);
  if (!port.ok()) return port.status();
  r->master_addr = d_.addr;
  r->master_port = *port;
  r->use_agent_store = d_.worker_store != nullptr;
  record.agent = r->use_agent_store;
  record.addr = JoinHostPort(r->master_addr, r->master_port);
  // The third field tells the other nodes' workers to be the store's
  // clients: rank 0 decides for the whole round, so a node started with
  // another --worker-store cannot split the workers.
  std::string master = absl::StrCat(r->master_port, " ", r->master_addr,
                                    r->use_agent_store ? " agent-store" : "");
  const std::string master_key = d_.keys->Master(st.round);
  // With the workers' store record, for `status` (once a worker connects
  // it shows who to): one request, since every other member's read of
  // the master record waits for it. Only `status` reads that record, so
  // a write that fails for it still writes the master record alone.
  auto both = d_.store->MultiSet(
      {{d_.keys->WorkerStore(), EncodeWorkerStoreRecord(record)},
       {master_key, master}},
      absl::ZeroDuration());
  if (!both.ok()) {
    DJ_LOG_WARNING(
        "cannot write the master record with the workers' store record "
        "(for status): {}; writing the master record alone",
        both.status().message());
    auto s = d_.store->Set(master_key, master);
    if (!s.ok()) return s.status();
  }
  return absl::OkStatus();
}

absl::Status MasterRecord::Read(
    const RdzvState& st,
    const std::optional<absl::StatusOr<std::string>>& master,
    RendezvousResult* r) {
  // Not rank 0 (any more): the workers' store is the new rank 0's.
  if (d_.worker_store != nullptr) d_.worker_store->Stop();
  auto v = master.has_value()
               ? *master
               : d_.store->Get(d_.keys->Master(st.round), d_.close_timeout);
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

}  // namespace distjob
