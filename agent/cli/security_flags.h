// The options of `distjob-agent run` (and `status`) that secure the
// embedded rendezvous store and the start barrier: the job's shared token
// and TLS files.
#ifndef DISTJOB_AGENT_CLI_SECURITY_FLAGS_H_
#define DISTJOB_AGENT_CLI_SECURITY_FLAGS_H_

#include "absl/status/statusor.h"
#include "agent/cli/flag_parser.h"
#include "common/environment.h"
#include "rendezvous/store/store_credentials.h"

namespace distjob {

// The variable that may hold the token itself. It is read, never printed,
// and removed from every worker's environment.
inline constexpr char kRdzvTokenVariable[] = "DISTJOB_RDZV_TOKEN";

// Registers --rdzv-token-file (DISTJOB_RDZV_TOKEN_FILE), --rdzv-tls-cert,
// --rdzv-tls-key, --rdzv-tls-ca and --rdzv-tls-server-name (DISTJOB_RDZV_
// TLS_CERT, ...), filling `out`'s paths.
void AddSecurityFlags(FlagSet* flags, StoreSecurityOptions* out);

// The TLS flags of the above alone (the `health` subcommand's client).
void AddTlsFlags(FlagSet* flags, StoreSecurityOptions* out);

// --health-tls (DISTJOB_HEALTH_TLS): the health server speaks TLS with the
// store's certificate.
void AddHealthTlsFlag(FlagSet* flags, bool* out);

// Loads what `options` names, the token from DISTJOB_RDZV_TOKEN in `env`
// when no file is given; InvalidArgument naming the flag and file.
absl::StatusOr<StoreSecurity> LoadSecurity(StoreSecurityOptions options,
                                           const EnvMap& env);

}  // namespace distjob

#endif  // DISTJOB_AGENT_CLI_SECURITY_FLAGS_H_
