// The bounds of the spawn service, and its health name: what one worker pod's
// agent lets MPI launchers run at once and hold.
#ifndef DISTJOB_SPAWN_SPAWN_LIMITS_H_
#define DISTJOB_SPAWN_SPAWN_LIMITS_H_

#include <cstddef>

#include "absl/time/time.h"

namespace distjob {

// The grpc.health.v1 service name that is SERVING while spawns are served.
inline constexpr char kSpawnHealthService[] = "distjob.spawn.Spawner";

struct SpawnLimits {
  // Commands running at once; past it a call is RESOURCE_EXHAUSTED. An MPI
  // launcher starts one daemon per node (and tree spawn a few more).
  int max_spawns = 64;
  // The largest message a caller may send (its command, a stdin chunk).
  int max_message_bytes = 128 * 1024;
  // What one read of a command's stdout or stderr sends. Output is read
  // only once the previous chunk is written to the call, so at most this
  // much (plus the pipe's own 64 KiB) is buffered per stream: a slow
  // caller slows the command instead of growing a queue.
  int output_chunk_bytes = 32 * 1024;
  // After the call ends: SIGTERM to the command's group, SIGKILL after this.
  absl::Duration kill_grace = absl::Seconds(3);
  // How long a caller has, once told the exit status, to close its side.
  absl::Duration close_wait = absl::Seconds(5);
  // Connections, in all and per address (see ConnLimits).
  size_t max_conns = 256;
  size_t max_conns_per_peer = 128;
};

}  // namespace distjob

#endif  // DISTJOB_SPAWN_SPAWN_LIMITS_H_
