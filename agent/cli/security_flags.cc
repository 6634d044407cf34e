#include "agent/cli/security_flags.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace distjob {

void AddSecurityFlags(FlagSet* flags, StoreSecurityOptions* out) {
  flags->Add(AgentFlag(
      "rdzv-token-file", "PATH",
      "The job's shared secret (e.g. a Kubernetes Secret volume): required "
      "on every call to the rendezvous store and the start barrier this "
      "agent hosts, and sent on every call it makes. DISTJOB_RDZV_TOKEN may "
      "hold the secret itself instead.",
      SetString(&out->token_file)));
  AddTlsFlags(flags, out);
}

void AddTlsFlags(FlagSet* flags, StoreSecurityOptions* out) {
  flags->Add(AgentFlag("rdzv-tls-cert", "PEM",
                       "This agent's certificate chain: the store and the "
                       "start barrier speak TLS (needs --rdzv-tls-key).",
                       SetString(&out->tls_cert)));
  flags->Add(AgentFlag("rdzv-tls-key", "PEM",
                       "The private key of --rdzv-tls-cert.",
                       SetString(&out->tls_key)));
  flags->Add(
      AgentFlag("rdzv-tls-ca", "PEM",
                "CA bundle: clients verify the store against it, and the store "
                "requires and verifies client certificates (mutual TLS).",
                SetString(&out->tls_ca)));
  flags->Add(AgentFlag(
      "rdzv-tls-server-name", "NAME",
      "The name checked against the store's certificate instead of the "
      "host of --rdzv-endpoint (e.g. one name every pod's cert carries).",
      SetString(&out->tls_server_name)));
}

void AddHealthTlsFlag(FlagSet* flags, bool* out) {
  flags->Add(AgentFlag(
      "health-tls", "",
      "Serve --health-port over TLS with --rdzv-tls-cert/--rdzv-tls-key "
      "(mutual with --rdzv-tls-ca), for probes other than the kubelet's "
      "gRPC probe, which speaks plaintext only.",
      SetBool(out), /*is_bool=*/true));
}

absl::StatusOr<StoreSecurity> LoadSecurity(StoreSecurityOptions options,
                                           const EnvMap& env) {
  if (options.token_file.empty()) {
    const auto it = env.find(kRdzvTokenVariable);
    if (it != env.end()) {
      // Set but empty (a Secret key that is missing or blank) must not
      // quietly mean "no authentication".
      if (it->second.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(kRdzvTokenVariable,
                         " is set but empty; unset it to run without a token"));
      }
      options.token_env = it->second;
    }
  }
  return LoadStoreSecurity(options);
}

}  // namespace distjob
