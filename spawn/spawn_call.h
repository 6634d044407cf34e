// One Spawn call, from its first message to the command's end: the pump
// between the call and the command's pipes. The first message names the
// command; stdin chunks, a stdin close and signals follow; output flows
// back chunk by chunk, then the exit status. When the caller goes away
// first (its stream ends or breaks), the command's whole group is ended.
#ifndef DISTJOB_SPAWN_SPAWN_CALL_H_
#define DISTJOB_SPAWN_SPAWN_CALL_H_

#include <string>

#include "common/environment.h"
#include "grpcpp/grpcpp.h"
#include "proto/spawn.grpc.pb.h"
#include "spawn/command.h"
#include "spawn/spawn_limits.h"

namespace distjob {

using SpawnStream =
    grpc::ServerReaderWriterInterface<spawn::SpawnReply, spawn::SpawnRequest>;

// What a call uses of its gRPC context. A seam: a grpc::ServerContext
// cannot be cancelled outside a live call, and the fuzz target serves
// calls without a server.
class SpawnCallContext {
 public:
  virtual ~SpawnCallContext() = default;
  virtual bool IsCancelled() const = 0;
  virtual void TryCancel() = 0;
  virtual std::string Peer() const = 0;
};

// The server's: a live call's context.
class GrpcSpawnCallContext final : public SpawnCallContext {
 public:
  explicit GrpcSpawnCallContext(grpc::ServerContext* ctx) : ctx_(ctx) {}
  bool IsCancelled() const override { return ctx_->IsCancelled(); }
  void TryCancel() override { ctx_->TryCancel(); }
  std::string Peer() const override { return ctx_->peer(); }

 private:
  grpc::ServerContext* ctx_;
};

// Serves one admitted call (its token already checked) to the end: its
// first message's command started by `start`; the status the call ends
// with. `ctx` is checked for cancellation.
grpc::Status ServeSpawnCall(SpawnCallContext* ctx, SpawnStream* stream,
                            const CommandStarter& start, const EnvMap& env,
                            const SpawnLimits& limits);

}  // namespace distjob

#endif  // DISTJOB_SPAWN_SPAWN_CALL_H_
