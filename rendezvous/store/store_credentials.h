// Who may talk to the embedded rendezvous store (and the start barrier,
// which runs over the same store): a shared job secret carried on every
// call, and optionally TLS (mutual when a CA is given). Everything is
// loaded and checked at start-up, so a file that does not load ends the
// run before anything listens or waits.
#ifndef DISTJOB_RENDEZVOUS_STORE_STORE_CREDENTIALS_H_
#define DISTJOB_RENDEZVOUS_STORE_STORE_CREDENTIALS_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/string_ref.h"

namespace grpc {
class ChannelCredentials;
class ServerCredentials;
class ChannelArguments;
}  // namespace grpc

namespace distjob {

// What the flags name, before anything is read.
struct StoreSecurityOptions {
  std::string token_file;       // --rdzv-token-file
  std::string token_env;        // the value of DISTJOB_RDZV_TOKEN, if set
  std::string tls_cert;         // --rdzv-tls-cert (PEM chain)
  std::string tls_key;          // --rdzv-tls-key (PEM private key)
  std::string tls_ca;           // --rdzv-tls-ca (PEM bundle)
  std::string tls_server_name;  // --rdzv-tls-server-name
};

// The loaded secrets. Never logged or printed: nothing formats this type.
struct StoreSecurity {
  std::string token;  // empty: no token is sent or required
  std::string cert_pem, key_pem, ca_pem;
  // The name the client checks the server's certificate against; empty:
  // the host of the endpoint it dials.
  std::string server_name;
  bool tls() const { return !cert_pem.empty(); }
};

// The largest token file accepted: a secret, not a document.
inline constexpr size_t kMaxTokenBytes = 4096;

// Reads the token file: one line of printable ASCII (a trailing newline is
// dropped, as `kubectl create secret --from-file` keeps it). InvalidArgument
// naming `path` when it is missing, unreadable, empty or too big.
absl::StatusOr<std::string> LoadTokenFile(const std::string& path);

// Reads and checks everything `options` names. The file wins over the
// variable when both are given. TLS files are parsed with OpenSSL: a cert
// that is not PEM, a key that is not PEM or does not match the cert, a CA
// bundle without a certificate are InvalidArgument naming the file and the
// reason. A key without a cert (or the reverse), or a CA or server name
// without both, is InvalidArgument too.
absl::StatusOr<StoreSecurity> LoadStoreSecurity(
    const StoreSecurityOptions& options);

// The gRPC metadata key the token travels in, and its value's prefix.
inline constexpr char kTokenMetadataKey[] = "authorization";
inline constexpr char kTokenPrefix[] = "Bearer ";

// Whether `header` (the metadata value a call carried) is "Bearer <token>",
// compared in constant time so the answer's timing does not reveal how
// much of a guess was right.
bool TokenMatches(absl::string_view header, absl::string_view token);

// The check every server of the job's token makes first: OK when `token`
// is empty or `metadata` (a call's client metadata) carries it; else
// UNAUTHENTICATED naming `server` ("this rendezvous store", ...) and
// whether the token was missing or wrong (never the token).
absl::Status CheckCallToken(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata,
    absl::string_view token, absl::string_view server);

// Insecure when `security` has no TLS; else TLS with its cert and key,
// requiring and verifying client certificates when it has a CA.
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(
    const StoreSecurity& security);

// Insecure when `security` has no TLS; else TLS verifying the server
// against its CA (gRPC's default roots without one) and presenting its cert.
// Sets the target-name override in `args` when a server name is given.
std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(
    const StoreSecurity& security, grpc::ChannelArguments* args);

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_STORE_STORE_CREDENTIALS_H_
