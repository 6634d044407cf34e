#include "common/environment.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace distjob {

absl::Status CheckExecStrings(const EnvMap& env, const std::string& origin) {
  for (const auto& [name, value] : env) {
    const size_t bytes = name.size() + 1 + value.size() + 1;
    if (bytes > kMaxExecString) {
      return absl::InvalidArgumentError(absl::StrCat(
          origin, " variable ", name, " is ", bytes,
          " bytes as NAME=value; the kernel passes at most ", kMaxExecString,
          " bytes (128 KiB) per environment string to a process"));
    }
  }
  return absl::OkStatus();
}

EnvMap EnvFromEnvp(const char* const* envp) {
  EnvMap env;
  if (envp == nullptr) return env;
  for (; *envp != nullptr; ++envp) {
    const char* eq = std::strchr(*envp, '=');
    if (eq == nullptr) continue;
    env.emplace(std::string(*envp, eq - *envp), std::string(eq + 1));
  }
  return env;
}

std::vector<std::string> EnvToStrings(const EnvMap& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [name, value] : env) out.push_back(name + "=" + value);
  return out;
}

std::optional<std::string> Lookup(const EnvMap& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  return it->second;
}

}  // namespace distjob
