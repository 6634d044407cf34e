#include "launchers/framework_types.h"

#include <cstdio>

#include "absl/strings/str_cat.h"

namespace distjob {

absl::StatusOr<Framework> ParseFramework(absl::string_view text) {
  for (Framework f :
       {Framework::kAuto, Framework::kPyTorch, Framework::kTensorFlow,
        Framework::kMXNet, Framework::kNone}) {
    if (text == FrameworkName(f)) return f;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "'", text, "' is not one of auto, pytorch, tensorflow, mxnet, none"));
}

const char* FrameworkName(Framework framework) {
  switch (framework) {
    case Framework::kAuto:
      return "auto";
    case Framework::kPyTorch:
      return "pytorch";
    case Framework::kTensorFlow:
      return "tensorflow";
    case Framework::kMXNet:
      return "mxnet";
    case Framework::kNone:
      return "none";
  }
  return "auto";
}

std::string JsonQuote(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

}  // namespace distjob
