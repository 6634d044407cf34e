// What a framework launcher hands the workers: variables to set, and where
// each value came from (for `distjob-agent env --explain`).
#ifndef DISTJOB_LAUNCHERS_FRAMEWORK_TYPES_H_
#define DISTJOB_LAUNCHERS_FRAMEWORK_TYPES_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace distjob {

struct LauncherEnv {
  std::map<std::string, std::string> vars;
  std::map<std::string, std::string> sources;

  void Set(const std::string& key, std::string value, std::string source) {
    vars[key] = std::move(value);
    sources[key] = std::move(source);
  }
};

// --framework: which framework environment a pod gets.
enum class Framework { kAuto, kPyTorch, kTensorFlow, kMXNet, kNone };

// auto | pytorch | tensorflow | mxnet | none; else InvalidArgument.
absl::StatusOr<Framework> ParseFramework(absl::string_view text);
const char* FrameworkName(Framework framework);

// A JSON string literal, quotes included.
std::string JsonQuote(absl::string_view s);

}  // namespace distjob

#endif  // DISTJOB_LAUNCHERS_FRAMEWORK_TYPES_H_
