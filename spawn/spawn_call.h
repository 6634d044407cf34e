// One Spawn call, from its first message to the command's end: the pump
// between the call and the command's pipes. The first message names the
// command; stdin chunks, a stdin close and signals follow; output flows
// back chunk by chunk, then the exit status. When the caller goes away
// first (its stream ends or breaks), the command's whole group is ended.
#ifndef DISTJOB_SPAWN_SPAWN_CALL_H_
#define DISTJOB_SPAWN_SPAWN_CALL_H_

#include "common/environment.h"
#include "grpcpp/grpcpp.h"
#include "proto/spawn.grpc.pb.h"
#include "spawn/spawn_limits.h"

namespace distjob {

using SpawnStream =
    grpc::ServerReaderWriterInterface<spawn::SpawnReply, spawn::SpawnRequest>;

// Serves one admitted call (its token already checked) to the end; the
// status the call ends with. `ctx` is checked for cancellation.
grpc::Status ServeSpawnCall(grpc::ServerContext* ctx, SpawnStream* stream,
                            const EnvMap& env, const SpawnLimits& limits);

}  // namespace distjob

#endif  // DISTJOB_SPAWN_SPAWN_CALL_H_
