#include "agent/rsh_args.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace distjob {
namespace {

bool TakesValue(char c) {
  return c != '\0' && std::strchr(kSshOptionsWithValue, c) != nullptr;
}
bool IsFlag(char c) {
  return c != '\0' && std::strchr(kSshFlags, c) != nullptr;
}

// One `-xyz` word (getopt's grouping, as ssh parses it) at args[*i]; may
// consume the next word as a value.
absl::Status ParseOptionWord(const std::vector<std::string>& args, size_t* i,
                             RshArgs* out) {
  const std::string& word = args[*i];
  for (size_t j = 1; j < word.size(); ++j) {
    const char c = word[j];
    if (IsFlag(c)) {
      out->ignored.push_back(absl::StrCat("-", std::string(1, c)));
      continue;
    }
    if (!TakesValue(c)) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown option -", std::string(1, c),
                       " (not an ssh option; see rsh --help)"));
    }
    std::string value = word.substr(j + 1);
    if (value.empty()) {
      if (*i + 1 >= args.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("option -", std::string(1, c), " needs a value"));
      }
      value = args[++*i];
    }
    out->ignored.push_back(absl::StrCat("-", std::string(1, c), " ", value));
    return absl::OkStatus();  // the value ends the word
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RshArgs> ParseRshArgs(const std::vector<std::string>& args) {
  RshArgs out;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.size() < 2 || a[0] != '-') break;
    if (absl::Status s = ParseOptionWord(args, &i, &out); !s.ok()) return s;
  }
  if (i >= args.size() || args[i].empty()) {
    return absl::InvalidArgumentError(
        "expected HOST: rsh [options] HOST "
        "COMMAND...");
  }
  out.host = args[i];
  if (const size_t at = out.host.rfind('@'); at != std::string::npos) {
    out.host = out.host.substr(at + 1);  // the user is the server's own
  }
  if (out.host.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", args[i], "' names no host"));
  }
  ++i;
  // ssh would open an interactive shell; the spawn service runs commands.
  if (i >= args.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a COMMAND after ", out.host,
                     " (no interactive shell is offered)"));
  }
  std::vector<std::string> words(args.begin() + static_cast<long>(i),
                                 args.end());
  out.command = absl::StrJoin(words, " ");
  return out;
}

}  // namespace distjob
