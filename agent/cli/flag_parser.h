// A small command-line parser with torchrun's conventions: every long flag is
// accepted with '-' or '_' between words (--nproc-per-node, --nproc_per_node),
// as "--flag value" or "--flag=value"; each flag may default from environment
// variables (torchrun's PET_<NAME>, the agent's DISTJOB_<NAME>); the command
// line wins over the environment; the first positional argument ends option
// parsing, and everything from it on is the worker command (argparse's
// REMAINDER), as is everything after "--". As argparse, a unique prefix of a
// long option stands for it ("--nproc 8"); an ambiguous one is an error
// naming the candidates.
#ifndef DISTJOB_AGENT_CLI_FLAG_PARSER_H_
#define DISTJOB_AGENT_CLI_FLAG_PARSER_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/environment.h"

namespace distjob {

struct Flag {
  // Long names without dashes, words joined by '-': {"nproc-per-node"}.
  // Single letters are short options: {"tee", "t"}.
  std::vector<std::string> names;
  // Environment variables consulted, in order, when the flag is not given.
  std::vector<std::string> env;
  // Boolean flags take no value on the command line; from the environment
  // they are set by presence (empty, 1, true) and cleared by 0 or false.
  bool is_bool = false;
  std::string metavar;  // e.g. "N|cpu|auto"; shown in help and errors
  std::string help;
  // Receives the value ("" for a boolean that is set, "0" for one cleared
  // from the environment) and `source`, the flag or env var it came from.
  // An error should say what is accepted; the parser prefixes the source.
  std::function<absl::Status(absl::string_view value, absl::string_view source)>
      set;
};

class FlagSet {
 public:
  explicit FlagSet(std::string usage) : usage_(std::move(usage)) {}

  void Add(Flag flag);

  // Applies environment defaults, then `args` (argv without the program and
  // subcommand). Returns the positional remainder (the worker command).
  // Errors are InvalidArgument with a message naming the flag or variable.
  absl::StatusOr<std::vector<std::string>> Parse(
      const std::vector<std::string>& args, const EnvMap& env) const;

  std::string Help() const;

 private:
  const Flag* Find(absl::string_view name) const;
  // A long option by its name or a unique prefix of it; nullptr when none
  // matches, InvalidArgument listing the candidates when several do.
  absl::StatusOr<const Flag*> FindLong(absl::string_view name) const;
  // Each flag's first variable that `env` sets.
  absl::Status ApplyEnv(const EnvMap& env) const;
  // The option args[*i] with its value: inline, or the next argument (*i
  // then moves past it).
  absl::Status ApplyOption(const std::vector<std::string>& args,
                           size_t* i) const;

  std::string usage_;
  std::vector<Flag> flags_;
};

using FlagSetter = std::function<absl::Status(absl::string_view value,
                                              absl::string_view source)>;

// A torchrun option: defaults from PET_<NAME> (NAME upper-cased, '-' as
// '_'), as torchrun's argparse actions do; `short_name` is e.g. "r".
Flag TorchrunFlag(const std::string& name, std::string metavar,
                  std::string help, FlagSetter set, bool is_bool = false,
                  const std::string& short_name = "");
// An option of the agent's own: defaults from DISTJOB_<NAME>.
Flag AgentFlag(const std::string& name, std::string metavar, std::string help,
               FlagSetter set, bool is_bool = false);

// Setters for the common value kinds.
FlagSetter SetString(std::string* out);
FlagSetter SetBool(bool* out);
FlagSetter SetInt(int* out, int min, int max);
// Durations as common/duration.h parses them (never negative).
FlagSetter SetDuration(absl::Duration* out);
// A host name or an IP address (common/net.h CheckHostName).
FlagSetter SetHostName(std::string* out);

// A setter storing what `parse` (value -> absl::StatusOr<T>, e.g.
// ParseLogLevel) makes of the value; its error is the flag's.
template <typename T, typename Parse>
FlagSetter SetParsed(T* out, Parse parse) {
  return [out, parse](absl::string_view v, absl::string_view) -> absl::Status {
    auto parsed = parse(std::string(v));
    if (!parsed.ok()) return parsed.status();
    *out = *std::move(parsed);
    return absl::OkStatus();
  };
}

// Normalises a flag name for lookup: '_' becomes '-'.
std::string CanonicalFlagName(absl::string_view name);

// Helpers for setters. Messages say what was wrong and what is accepted; the
// parser prefixes the flag or variable the value came from.
absl::StatusOr<int> ParseInt(absl::string_view value, int min, int max);
absl::StatusOr<bool> ParseBool(absl::string_view value);

}  // namespace distjob

#endif  // DISTJOB_AGENT_CLI_FLAG_PARSER_H_
