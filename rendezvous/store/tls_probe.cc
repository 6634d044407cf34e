#include "rendezvous/store/tls_probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/socket_address.h"

namespace distjob {
namespace {

struct CtxDeleter {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
struct SslDeleter {
  void operator()(SSL* s) const { SSL_free(s); }
};

// A non-blocking TCP connection to `address` (a numeric host and port, as
// the store client resolved it), or -1. Parsed here, not by getaddrinfo:
// nothing in the agent goes through glibc's NSS (common/resolver.h).
int Connect(const std::string& address) {
  absl::string_view host = address;
  const size_t colon = host.rfind(':');
  int port = 0;
  if (colon == absl::string_view::npos ||
      !absl::SimpleAtoi(host.substr(colon + 1), &port) || port <= 0 ||
      port > 65535) {
    return -1;
  }
  const std::optional<SocketAddress> to =
      ParseSocketAddress(host.substr(0, colon), port);
  if (!to.has_value()) return -1;
  const int fd =
      socket(to->family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect(fd, to->get(), to->length) != 0 &&
      errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  return fd;
}

bool UsePem(SSL_CTX* ctx, const StoreSecurity& security) {
  BIO* bio = BIO_new_mem_buf(security.cert_pem.data(),
                             static_cast<int>(security.cert_pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  bio = BIO_new_mem_buf(security.key_pem.data(),
                        static_cast<int>(security.key_pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  const bool ok = cert != nullptr && key != nullptr &&
                  SSL_CTX_use_certificate(ctx, cert) == 1 &&
                  SSL_CTX_use_PrivateKey(ctx, key) == 1;
  X509_free(cert);
  EVP_PKEY_free(key);
  return ok;
}

// The reason of OpenSSL's last error when it is an alert from the peer.
std::string PeerAlert() {
  std::string alert;
  while (const unsigned long err = ERR_get_error()) {  // NOLINT(runtime/int)
    const char* reason = ERR_reason_error_string(err);
    if (reason != nullptr && absl::StrContains(reason, "alert")) {
      alert = reason;
    }
  }
  return alert;
}

}  // namespace

std::string ClientCertificateRefusal(const std::string& address,
                                     const StoreSecurity& security,
                                     absl::Duration timeout) {
  std::unique_ptr<SSL_CTX, CtxDeleter> ctx(SSL_CTX_new(TLS_client_method()));
  // The store's certificate is not what is asked here (gRPC checks it);
  // only whether the store refuses ours.
  if (ctx == nullptr || !UsePem(ctx.get(), security)) return "";
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);
  // gRPC offers h2 by ALPN; a store that requires it refuses without.
  static const unsigned char kAlpn[] = {2, 'h', '2'};
  SSL_CTX_set_alpn_protos(ctx.get(), kAlpn, sizeof(kAlpn));
  const int fd = Connect(address);
  if (fd < 0) return "";
  std::unique_ptr<SSL, SslDeleter> ssl(SSL_new(ctx.get()));
  SSL_set_fd(ssl.get(), fd);
  ERR_clear_error();
  const absl::Time deadline = absl::Now() + timeout;
  bool handshaken = false;
  std::string alert;
  for (;;) {
    char byte;
    const int r =
        handshaken ? SSL_read(ssl.get(), &byte, 1) : SSL_connect(ssl.get());
    if (r > 0) {
      if (handshaken) break;  // the server speaks: it kept us
      handshaken = true;
      continue;
    }
    const int err = SSL_get_error(ssl.get(), r);
    if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
      alert = PeerAlert();
      // gRPC's server closes without sending its alert; a store that
      // accepted the handshake sends its HTTP/2 SETTINGS at once.
      if (alert.empty() && handshaken) {
        alert = "it closed the connection after the TLS handshake";
      }
      break;
    }
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left <= 0) break;
    pollfd p{fd,
             static_cast<short>(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT),
             0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) break;
  }
  ERR_clear_error();
  ssl.reset();
  close(fd);
  return alert;
}

}  // namespace distjob
