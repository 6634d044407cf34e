// The client side of the spawn service, shared by its two callers on the
// launcher: `distjob-agent rsh` (Spawn, for mpirun) and the launcher
// itself (EndJob, once mpirun has ended).
#ifndef DISTJOB_SPAWN_SPAWN_CLIENT_H_
#define DISTJOB_SPAWN_SPAWN_CLIENT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/resolver.h"
#include "grpcpp/grpcpp.h"
#include "rendezvous/store/store_credentials.h"

namespace distjob {

// A channel to the spawn server at `target`: the job's TLS when
// `security` has it (the server's certificate checked against the host
// as given), replies of at most `max_reply_bytes`.
std::shared_ptr<grpc::Channel> MakeSpawnChannel(const GrpcTarget& target,
                                                const StoreSecurity& security,
                                                int max_reply_bytes);

// Puts the job's token, when there is one, on a call.
void AddSpawnToken(grpc::ClientContext* ctx, const StoreSecurity& security);

// One worker's answer to EndJob: `error` empty when it took the word.
struct EndJobAnswer {
  std::string host;
  std::string error;
};

// Tells the spawn server of each of `hosts` on `port` that the job ended
// with `exit_code` (`reason`: one line): every name looked up at once
// (within half of `timeout`), then the calls, up to 256 at once, all
// within `timeout` of the start. Returns each host's answer, in order.
std::vector<EndJobAnswer> EndJobOnHosts(const std::vector<std::string>& hosts,
                                        int port, const StoreSecurity& security,
                                        int exit_code,
                                        const std::string& reason,
                                        absl::Duration timeout);

}  // namespace distjob

#endif  // DISTJOB_SPAWN_SPAWN_CLIENT_H_
