#include "launchers/worker_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace distjob {

std::vector<std::string> WorkerArgv(const std::vector<std::string>& command,
                                    const WorkerCommandOptions& options,
                                    int local_rank) {
  std::vector<std::string> argv;
  if (command.empty()) return argv;
  const bool python_script =
      !options.no_python && (options.module || options.always_python ||
                             absl::EndsWith(command[0], ".py"));
  if (python_script) {
    argv = {options.python, "-u"};
    if (options.module) argv.push_back("-m");
  }
  const std::string rank = std::to_string(local_rank);
  for (const std::string& arg : command) {
    argv.push_back(absl::StrReplaceAll(arg, {{"${local_rank}", rank}}));
  }
  return argv;
}

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         access(path.c_str(), X_OK) == 0;
}

std::string ResolveOnPath(
    const std::string& program, absl::string_view path_var,
    const std::function<bool(const std::string&)>& executable) {
  if (program.empty()) return "";
  if (program.find('/') != std::string::npos) return program;
  for (absl::string_view dir : absl::StrSplit(path_var, ':')) {
    // An empty entry is the current directory, as for execvp.
    const std::string candidate =
        dir.empty() ? "./" + program : absl::StrCat(dir, "/", program);
    if (executable(candidate)) return candidate;
  }
  return "";
}

std::string InterpreterHint(absl::string_view error_text,
                            const std::string& interpreter) {
  if (!absl::StrContains(error_text, "No module named 'torch'") &&
      !absl::StrContains(error_text, "No module named 'torch.")) {
    return "";
  }
  return absl::StrCat(
      "the workers ran ", interpreter.empty() ? "python3" : interpreter,
      ", which has no PyTorch: set PYTHON_EXEC to the Python that has it "
      "(e.g. PYTHON_EXEC=/opt/venv/bin/python)");
}

namespace {

std::string Basename(absl::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == absl::string_view::npos ? path
                                                      : path.substr(slash + 1));
}

bool IsPython(absl::string_view word) {
  return absl::StartsWith(Basename(word), "python");
}

bool IsTorchModule(absl::string_view word) {
  return word == "torch.distributed.run" || word == "torch.distributed.launch";
}

// argv-level: the launcher itself, or Python running its module.
bool IsLauncherArgv(const std::vector<std::string>& words) {
  if (words.empty()) return false;
  const std::string name = Basename(words[0]);
  if (name == "torchrun" || name == "distjob-agent") return true;
  if (!IsPython(words[0])) return false;
  for (size_t i = 1; i + 1 < words.size(); ++i) {
    if (words[i] == "-m" && IsTorchModule(words[i + 1])) return true;
    if (words[i] == "-m" || words[i][0] != '-') return false;
  }
  return false;
}

bool IsShell(absl::string_view word) {
  const std::string name = Basename(word);
  return name == "sh" || name == "bash" || name == "dash" || name == "zsh" ||
         name == "ash" || name == "ksh";
}

}  // namespace

bool IsLauncherCommand(const std::vector<std::string>& command) {
  if (IsLauncherArgv(command)) return true;
  if (command.empty() || !IsShell(command[0])) return false;
  // The script of `sh -c SCRIPT` (also -ec, -lc...): each simple command
  // in it, split at the shell's separators, is checked as an argv.
  for (size_t i = 1; i + 1 < command.size(); ++i) {
    const std::string& flag = command[i];
    if (flag.size() < 2 || flag[0] != '-') break;
    if (flag.find('c') == std::string::npos) continue;
    for (absl::string_view part :
         absl::StrSplit(command[i + 1], absl::ByAnyChar(";&|()\n`"))) {
      std::vector<std::string> words;
      for (absl::string_view w :
           absl::StrSplit(part, absl::ByAnyChar(" \t\"'"), absl::SkipEmpty())) {
        words.emplace_back(w);
      }
      // `exec torchrun ...`, `env A=1 torchrun ...`
      while (!words.empty() && (words[0] == "exec" || words[0] == "env" ||
                                words[0].find('=') != std::string::npos)) {
        words.erase(words.begin());
      }
      if (IsLauncherArgv(words)) return true;
    }
    return false;
  }
  return false;
}

}  // namespace distjob
