#include "rendezvous/store/store_credentials.h"

#include <errno.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/server_credentials.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace distjob {
namespace {

// A PEM bundle of a long chain is a few tens of KB; a limit keeps a wrong
// path (a log, a device) from being read whole.
constexpr size_t kMaxPemBytes = 1 << 20;

absl::StatusOr<std::string> ReadBounded(const std::string& flag,
                                        const std::string& path,
                                        size_t max_bytes) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": cannot open: ", strerror(errno)));
  }
  std::string data;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " ", path, ": cannot read: ", strerror(err)));
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
    if (data.size() > max_bytes) {
      close(fd);
      return absl::InvalidArgumentError(absl::StrCat(
          flag, " ", path, ": larger than the ", max_bytes, " bytes accepted"));
    }
  }
  close(fd);
  if (data.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": the file is empty"));
  }
  return data;
}

// One line of printable ASCII: what a gRPC metadata value can carry.
absl::Status CheckToken(absl::string_view token, absl::string_view source) {
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": the token is empty"));
  }
  if (token.size() > kMaxTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": the token is longer than ", kMaxTokenBytes, " bytes"));
  }
  for (const char c : token) {
    if (c < 0x21 || c > 0x7e) {
      // Never echo the secret, not even a character of it.
      return absl::InvalidArgumentError(absl::StrCat(
          source,
          ": the token must be one line of printable ASCII without spaces"));
    }
  }
  return absl::OkStatus();
}

std::string OpenSslReason() {
  const unsigned long err = ERR_get_error();  // NOLINT(runtime/int)
  ERR_clear_error();
  if (err == 0) return "no PEM data found";
  char buf[256];
  ERR_error_string_n(err, buf, sizeof(buf));
  return buf;
}

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

std::unique_ptr<BIO, BioDeleter> MemBio(const std::string& pem) {
  return std::unique_ptr<BIO, BioDeleter>(
      BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

absl::StatusOr<std::unique_ptr<X509, X509Deleter>> FirstCert(
    const std::string& flag, const std::string& path, const std::string& pem) {
  ERR_clear_error();
  auto bio = MemBio(pem);
  std::unique_ptr<X509, X509Deleter> cert(
      PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " ", path, ": not a PEM certificate (", OpenSslReason(), ")"));
  }
  return cert;
}

}  // namespace

absl::StatusOr<std::string> LoadTokenFile(const std::string& path) {
  auto data = ReadBounded("--rdzv-token-file", path, kMaxTokenBytes + 2);
  if (!data.ok()) return data.status();
  absl::string_view token = *data;
  if (absl::ConsumeSuffix(&token, "\n")) absl::ConsumeSuffix(&token, "\r");
  const std::string source = absl::StrCat("--rdzv-token-file ", path);
  if (absl::Status s = CheckToken(token, source); !s.ok()) return s;
  return std::string(token);
}

absl::StatusOr<StoreSecurity> LoadStoreSecurity(
    const StoreSecurityOptions& options) {
  StoreSecurity out;
  if (!options.token_file.empty()) {
    auto token = LoadTokenFile(options.token_file);
    if (!token.ok()) return token.status();
    out.token = *std::move(token);
  } else if (!options.token_env.empty()) {
    if (absl::Status s = CheckToken(options.token_env, "DISTJOB_RDZV_TOKEN");
        !s.ok()) {
      return s;
    }
    out.token = options.token_env;
  }
  const bool has_cert = !options.tls_cert.empty();
  const bool has_key = !options.tls_key.empty();
  if (has_cert != has_key) {
    return absl::InvalidArgumentError(
        has_cert ? "--rdzv-tls-cert needs --rdzv-tls-key (its private key)"
                 : "--rdzv-tls-key needs --rdzv-tls-cert (its certificate)");
  }
  if (!has_cert) {
    if (!options.tls_ca.empty() || !options.tls_server_name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          options.tls_ca.empty() ? "--rdzv-tls-server-name" : "--rdzv-tls-ca",
          " needs --rdzv-tls-cert and --rdzv-tls-key: every agent may host "
          "the store, so every agent has a certificate"));
    }
    return out;
  }
  auto cert_pem =
      ReadBounded("--rdzv-tls-cert", options.tls_cert, kMaxPemBytes);
  if (!cert_pem.ok()) return cert_pem.status();
  auto key_pem = ReadBounded("--rdzv-tls-key", options.tls_key, kMaxPemBytes);
  if (!key_pem.ok()) return key_pem.status();
  auto cert = FirstCert("--rdzv-tls-cert", options.tls_cert, *cert_pem);
  if (!cert.ok()) return cert.status();
  {
    ERR_clear_error();
    auto bio = MemBio(*key_pem);
    std::unique_ptr<EVP_PKEY, KeyDeleter> key(
        PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
    if (key == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--rdzv-tls-key ", options.tls_key,
                       ": not a PEM private key (", OpenSslReason(), ")"));
    }
    if (X509_check_private_key(cert->get(), key.get()) != 1) {
      ERR_clear_error();
      return absl::InvalidArgumentError(absl::StrCat(
          "--rdzv-tls-key ", options.tls_key,
          ": the key does not match the certificate of --rdzv-tls-cert ",
          options.tls_cert));
    }
  }
  if (!options.tls_ca.empty()) {
    auto ca_pem = ReadBounded("--rdzv-tls-ca", options.tls_ca, kMaxPemBytes);
    if (!ca_pem.ok()) return ca_pem.status();
    auto ca = FirstCert("--rdzv-tls-ca", options.tls_ca, *ca_pem);
    if (!ca.ok()) return ca.status();
    out.ca_pem = *std::move(ca_pem);
  }
  out.cert_pem = *std::move(cert_pem);
  out.key_pem = *std::move(key_pem);
  out.server_name = options.tls_server_name;
  return out;
}

bool TokenMatches(absl::string_view header, absl::string_view token) {
  if (token.empty()) return true;
  if (!absl::ConsumePrefix(&header, kTokenPrefix)) return false;
  // The length is not secret (the file's size is not); the bytes are.
  if (header.size() != token.size()) return false;
  return CRYPTO_memcmp(header.data(), token.data(), token.size()) == 0;
}

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(
    const StoreSecurity& security) {
  if (!security.tls()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      security.ca_pem.empty()
          ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
          : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = security.ca_pem;
  options.pem_key_cert_pairs.push_back({security.key_pem, security.cert_pem});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(
    const StoreSecurity& security, grpc::ChannelArguments* args) {
  if (!security.tls()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = security.ca_pem;
  options.pem_private_key = security.key_pem;
  options.pem_cert_chain = security.cert_pem;
  if (!security.server_name.empty() && args != nullptr) {
    args->SetSslTargetNameOverride(security.server_name);
  }
  return grpc::SslCredentials(options);
}

}  // namespace distjob
