#include "agent/cli/subcommand_flags.h"

#include <cstdio>

#include "absl/strings/str_cat.h"

namespace distjob {

bool HelpRequested(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--") return false;
    if (a == "-h" || a == "--help") return true;
  }
  return false;
}

std::optional<int> ParseSubcommandFlags(absl::string_view command,
                                        const FlagSet& flags,
                                        const std::vector<std::string>& args,
                                        const EnvMap& env,
                                        size_t max_positional,
                                        std::vector<std::string>* positional) {
  if (HelpRequested(args)) {
    std::fputs(flags.Help().c_str(), stdout);
    return 0;
  }
  auto rest = flags.Parse(args, env);
  if (rest.ok() && rest->size() > max_positional) {
    rest = absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", (*rest)[max_positional], "'"));
  }
  if (!rest.ok()) {
    std::fprintf(stderr, "distjob-agent %s: %s\n", std::string(command).c_str(),
                 std::string(rest.status().message()).c_str());
    return kExitUsage;
  }
  *positional = *std::move(rest);
  return std::nullopt;
}

}  // namespace distjob
