// Why a mutual-TLS store closed this agent's connection. Under TLS 1.3 the
// client's handshake ends before the server has checked the client's
// certificate: a certificate the store refuses reaches gRPC as a closed
// socket after the handshake, the same words as a store that went away,
// and was retried until join_timeout. One handshake of our own, with the
// same files, reads the server's alert and tells the two apart.
#ifndef DISTJOB_RENDEZVOUS_STORE_TLS_PROBE_H_
#define DISTJOB_RENDEZVOUS_STORE_TLS_PROBE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "rendezvous/store/store_credentials.h"

namespace distjob {

// Connects to `address` ("10.0.0.1:29400" or "[fd00::1]:29400"), makes a
// TLS handshake presenting `security`'s certificate and waits up to
// `timeout` in all for the server's first record. Returns why the server
// refused the certificate: its TLS alert ("tlsv13 alert certificate
// required", ...) or, as gRPC's server closes without one, that it closed
// the connection after the handshake without a byte (a store that accepts
// sends its HTTP/2 SETTINGS at once). "" when it did not (it spoke, the
// probe timed out, or failed before TLS: nothing known).
std::string ClientCertificateRefusal(const std::string& address,
                                     const StoreSecurity& security,
                                     absl::Duration timeout);

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_STORE_TLS_PROBE_H_
