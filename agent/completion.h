// Shell completion for distjob-agent and its `torchrun` name: torchrun's
// --print-completion bash|zsh|tcsh and `distjob-agent completion SHELL`.
// The option lists are read from each subcommand's own --help, so a new
// flag is completed without touching this file.
#ifndef DISTJOB_AGENT_COMPLETION_H_
#define DISTJOB_AGENT_COMPLETION_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace distjob {

struct CompletedCommand {
  std::string name;                  // "run"
  std::vector<std::string> options;  // "--nproc-per-node", ...
};

// The long options ("--x") a FlagSet help text lists, in order; each name
// with '-' between words also in its '_' spelling, as torchrun accepts.
std::vector<std::string> OptionsInHelp(absl::string_view help);

// The script for `shell` (bash, zsh or tcsh); InvalidArgument naming the
// accepted shells otherwise. `run` also completes the `torchrun` name.
absl::StatusOr<std::string> CompletionScript(
    absl::string_view shell, const std::vector<CompletedCommand>& commands);

// What `print` writes to stdout (a subcommand's --help), as a string.
std::string CaptureStdout(const std::function<void()>& print);

}  // namespace distjob

#endif  // DISTJOB_AGENT_COMPLETION_H_
