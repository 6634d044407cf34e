#include "rendezvous/fake_rendezvous.h"

#include <utility>

namespace distjob {

void FakeRendezvousScript::FireMembershipChange() {
  changed = true;
  if (on_change) on_change();
}

RendezvousResult FakeRound(int64_t round, int restart_count) {
  RendezvousResult r;
  r.round = round;
  r.group_rank = 0;
  r.group_world_size = 2;
  r.base_rank = 0;
  r.world_size = 2;
  r.master_addr = "127.0.0.1";
  r.master_port = 29500;
  r.run_id = "fake";
  r.restart_count = restart_count;
  return r;
}

absl::StatusOr<RendezvousResult> FakeRendezvous::Next(int local_world_size) {
  (void)local_world_size;
  ++script_->next_calls;
  script_->changed = false;
  if (script_->rounds.empty()) {
    return absl::FailedPreconditionError(
        "fake rendezvous: no round scripted for this Next");
  }
  absl::StatusOr<RendezvousResult> round = std::move(script_->rounds.front());
  script_->rounds.pop_front();
  return round;
}

absl::StatusOr<RendezvousResult> FakeElasticRendezvous::Next(
    int local_world_size) {
  return base_.Next(local_world_size);
}

bool FakeElasticRendezvous::ClaimFailure() {
  ++script_->claim_calls;
  if (script_->claims.empty()) {
    ++script_->claim_overruns;
    return false;
  }
  const bool won = script_->claims.front();
  script_->claims.pop_front();
  return won;
}

}  // namespace distjob
