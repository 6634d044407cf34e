#include "agent/rsh_env.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/cli/security_flags.h"
#include "common/errno_status.h"

namespace distjob {
namespace {

// `text` into the new file `path`, readable by this user only.
absl::Status WriteSecretFile(const std::string& path, const std::string& text) {
  const int fd =
      open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError(errno, absl::StrCat("cannot create ", path));
  const bool whole =
      write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int error = errno;
  close(fd);
  if (!whole) return ErrnoError(error, absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace

EnvMap RshSettingsEnv(const RunOptions& options) {
  EnvMap env = {{"DISTJOB_SPAWN_PORT", absl::StrCat(options.mpi.spawn_port)}};
  const StoreSecurityOptions& given = options.security_files;
  const std::pair<const char*, const std::string*> settings[] = {
      {"DISTJOB_RDZV_TOKEN_FILE", &given.token_file},
      {"DISTJOB_RDZV_TLS_CERT", &given.tls_cert},
      {"DISTJOB_RDZV_TLS_KEY", &given.tls_key},
      {"DISTJOB_RDZV_TLS_CA", &given.tls_ca},
      {"DISTJOB_RDZV_TLS_SERVER_NAME", &given.tls_server_name},
  };
  for (const auto& [name, value] : settings) {
    if (!value->empty()) env[name] = *value;
  }
  return env;
}

absl::StatusOr<EnvMap> MakeRshEnv(const RunOptions& options, EnvMap env,
                                  const std::string& dir) {
  env.erase(kRdzvTokenVariable);
  for (auto& [name, value] : RshSettingsEnv(options)) {
    env[name] = std::move(value);
  }
  if (options.security.token.empty() ||
      !options.security_files.token_file.empty()) {
    return env;
  }
  if (dir.empty()) {
    return absl::InternalError(
        "no private directory for the token's file that rsh reads");
  }
  const std::string path = absl::StrCat(dir, "/", kRshTokenFile);
  if (absl::Status s = WriteSecretFile(path, options.security.token); !s.ok()) {
    return s;
  }
  env["DISTJOB_RDZV_TOKEN_FILE"] = path;
  return env;
}

}  // namespace distjob
