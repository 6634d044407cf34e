#include "rendezvous/store/pem_files.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/files.h"

namespace distjob {
namespace {

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

std::string OpenSslReason() {
  const unsigned long err = ERR_get_error();  // NOLINT(runtime/int)
  ERR_clear_error();
  if (err == 0) return "no PEM data found";
  char buf[256];
  ERR_error_string_n(err, buf, sizeof(buf));
  return buf;
}

std::unique_ptr<X509, X509Deleter> FirstCert(const std::string& pem) {
  auto bio = MemBio(pem);
  return std::unique_ptr<X509, X509Deleter>(
      PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

std::unique_ptr<EVP_PKEY, KeyDeleter> PrivateKey(const std::string& pem) {
  auto bio = MemBio(pem);
  return std::unique_ptr<EVP_PKEY, KeyDeleter>(
      PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
}

absl::StatusOr<std::string> ReadPem(absl::string_view named_by,
                                    const std::string& path) {
  absl::StatusOr<std::string> pem = ReadInputFile(named_by, path, kMaxPemBytes);
  if (pem.ok() && pem->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(FileLabel(named_by, path), ": the file is empty"));
  }
  return pem;
}

absl::Status NotPem(absl::string_view named_by, const std::string& path,
                    absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(FileLabel(named_by, path),
                                                 ": not a PEM ", what, " (",
                                                 OpenSslReason(), ")"));
}

}  // namespace

absl::StatusOr<std::string> ReadPemCertificates(absl::string_view named_by,
                                                const std::string& path) {
  absl::StatusOr<std::string> pem = ReadPem(named_by, path);
  if (!pem.ok()) return pem.status();
  ERR_clear_error();
  if (FirstCert(*pem) == nullptr) return NotPem(named_by, path, "certificate");
  return pem;
}

absl::StatusOr<std::string> ReadPemPrivateKey(absl::string_view named_by,
                                              const std::string& path) {
  absl::StatusOr<std::string> pem = ReadPem(named_by, path);
  if (!pem.ok()) return pem.status();
  ERR_clear_error();
  if (PrivateKey(*pem) == nullptr) return NotPem(named_by, path, "private key");
  return pem;
}

absl::Status CheckKeyMatchesCertificate(const std::string& cert_pem,
                                        absl::string_view cert_named_by,
                                        const std::string& cert_path,
                                        const std::string& key_pem,
                                        absl::string_view key_named_by,
                                        const std::string& key_path) {
  const auto cert = FirstCert(cert_pem);
  const auto key = PrivateKey(key_pem);
  const bool match = cert != nullptr && key != nullptr &&
                     X509_check_private_key(cert.get(), key.get()) == 1;
  ERR_clear_error();
  if (match) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(FileLabel(key_named_by, key_path),
                   ": the key does not match the certificate of ",
                   FileLabel(cert_named_by, cert_path)));
}

}  // namespace distjob
