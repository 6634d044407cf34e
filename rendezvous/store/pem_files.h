// The PEM files the store's TLS is made of (--rdzv-tls-*, etcd's
// --rdzv-conf ca_cert/cert/key), read through common/files' one input
// reader and parsed at start: a file that is not what it should be is
// exit 2 naming it, never a TLS handshake that fails until the join
// timeout.
#ifndef DISTJOB_RENDEZVOUS_STORE_PEM_FILES_H_
#define DISTJOB_RENDEZVOUS_STORE_PEM_FILES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace distjob {

// A PEM bundle of a long chain is a few tens of KB; a limit keeps a wrong
// path (a log, a device) from being read whole.
inline constexpr size_t kMaxPemBytes = 1 << 20;

// The text of `path` when its first PEM block is a certificate.
// InvalidArgument "<named_by> '<path>': ..." otherwise (unreadable, a FIFO,
// too large, empty, not PEM), with OpenSSL's reason.
absl::StatusOr<std::string> ReadPemCertificates(absl::string_view named_by,
                                                const std::string& path);

// The text of `path` when it holds a PEM private key; InvalidArgument as
// ReadPemCertificates.
absl::StatusOr<std::string> ReadPemPrivateKey(absl::string_view named_by,
                                              const std::string& path);

// InvalidArgument naming both files unless `key_pem` is the private key of
// the first certificate of `cert_pem` (both already read by the above).
absl::Status CheckKeyMatchesCertificate(const std::string& cert_pem,
                                        absl::string_view cert_named_by,
                                        const std::string& cert_path,
                                        const std::string& key_pem,
                                        absl::string_view key_named_by,
                                        const std::string& key_path);

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_STORE_PEM_FILES_H_
