#include "rendezvous/store/store_credentials.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/security/server_credentials.h>
#include <openssl/crypto.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "rendezvous/store/pem_files.h"

namespace distjob {
namespace {

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

}  // namespace

absl::StatusOr<std::string> LoadTokenFile(const std::string& path) {
  auto data = ReadInputFile("--rdzv-token-file", path, kMaxTokenBytes + 2);
  if (!data.ok()) return data.status();
  const std::string source = FileLabel("--rdzv-token-file", path);
  if (data->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": the file is empty"));
  }
  absl::string_view token = *data;
  if (absl::ConsumeSuffix(&token, "\n")) absl::ConsumeSuffix(&token, "\r");
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
  auto cert_pem = ReadPemCertificates("--rdzv-tls-cert", options.tls_cert);
  if (!cert_pem.ok()) return cert_pem.status();
  auto key_pem = ReadPemPrivateKey("--rdzv-tls-key", options.tls_key);
  if (!key_pem.ok()) return key_pem.status();
  if (absl::Status s = CheckKeyMatchesCertificate(
          *cert_pem, "--rdzv-tls-cert", options.tls_cert, *key_pem,
          "--rdzv-tls-key", options.tls_key);
      !s.ok()) {
    return s;
  }
  if (!options.tls_ca.empty()) {
    auto ca_pem = ReadPemCertificates("--rdzv-tls-ca", options.tls_ca);
    if (!ca_pem.ok()) return ca_pem.status();
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

absl::Status CheckCallToken(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata,
    absl::string_view token, absl::string_view server) {
  if (token.empty()) return absl::OkStatus();
  const auto it = metadata.find(kTokenMetadataKey);
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        absl::StrCat(server, " requires the job's token"));
  }
  if (!TokenMatches(absl::string_view(it->second.data(), it->second.size()),
                    token)) {
    return absl::UnauthenticatedError(
        absl::StrCat(server, " refused the token"));
  }
  return absl::OkStatus();
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
