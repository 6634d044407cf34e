// A process environment as an ordered map, convertible to and from envp.
#ifndef DISTJOB_COMMON_ENVIRONMENT_H_
#define DISTJOB_COMMON_ENVIRONMENT_H_

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace distjob {

// The kernel's limit on one argv or envp string, NUL included
// (MAX_ARG_STRLEN, 32 pages); execve fails with E2BIG past it.
inline constexpr size_t kMaxExecString = 32 * 4096;

using EnvMap = std::map<std::string, std::string>;

// Variables with where each came from (for `env --explain`).
struct SourcedEnv {
  EnvMap vars;
  std::map<std::string, std::string> sources;

  void Set(const std::string& key, std::string value, std::string source) {
    vars[key] = std::move(value);
    sources[key] = std::move(source);
  }
};

// Reads a NULL-terminated envp (e.g. `environ`). Entries without '=' are
// skipped; the first of duplicate names wins, as getenv(3) does.
EnvMap EnvFromEnvp(const char* const* envp);

// "NAME=value" strings, sorted by name.
std::vector<std::string> EnvToStrings(const EnvMap& env);

// The value of `name`, or nullopt when unset (an empty value is set).
std::optional<std::string> Lookup(const EnvMap& env, const std::string& name);

// OK when every "NAME=value" of `env` fits in kMaxExecString; otherwise
// InvalidArgument naming `origin`, the variable, its size and the limit, so
// a job fails at start rather than with "cannot execute" at every spawn.
absl::Status CheckExecStrings(const EnvMap& env, const std::string& origin);

}  // namespace distjob

#endif  // DISTJOB_COMMON_ENVIRONMENT_H_
