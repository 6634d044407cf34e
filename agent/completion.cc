#include "agent/completion.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace distjob {

std::vector<std::string> OptionsInHelp(absl::string_view help) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  auto add = [&](std::string option) {
    if (seen.insert(option).second) out.push_back(std::move(option));
  };
  for (absl::string_view line : absl::StrSplit(help, '\n')) {
    // Option lines are "  -x, --long-name METAVAR"; descriptions are
    // indented further.
    if (!absl::StartsWith(line, "  -")) continue;
    for (absl::string_view word :
         absl::StrSplit(line, ' ', absl::SkipEmpty())) {
      absl::ConsumeSuffix(&word, ",");
      if (!absl::StartsWith(word, "--") || word.size() < 3) continue;
      add(std::string(word));
      std::string underscore(word.substr(2));
      for (char& c : underscore) c = c == '-' ? '_' : c;
      if (underscore != word.substr(2)) add("--" + underscore);
    }
  }
  return out;
}

namespace {

std::string BashFunction(const std::vector<CompletedCommand>& commands) {
  std::vector<std::string> names;
  std::string cases;
  for (const CompletedCommand& c : commands) {
    names.push_back(c.name);
    absl::StrAppend(&cases, "    ", c.name, ") opts='",
                    absl::StrJoin(c.options, " "), "' ;;\n");
  }
  const std::string all = absl::StrJoin(names, "|");
  return absl::StrCat(
      "_distjob_agent() {\n"
      "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" cmd='' opts='' i\n"
      "  if [[ \"${COMP_WORDS[0]##*/}\" == torchrun ]]; then\n"
      "    cmd=run\n"
      "  else\n"
      "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
      "      case \"${COMP_WORDS[i]}\" in\n"
      "        ",
      all,
      ") cmd=\"${COMP_WORDS[i]}\"; break ;;\n"
      "      esac\n"
      "    done\n"
      "  fi\n"
      "  if [[ -z \"$cmd\" ]]; then\n"
      "    COMPREPLY=($(compgen -W '",
      absl::StrJoin(names, " "),
      " --help --version --licenses' -- \"$cur\"))\n"
      "    return 0\n"
      "  fi\n"
      "  case \"$cmd\" in\n",
      cases,
      "  esac\n"
      "  if [[ \"$cur\" == -* ]]; then\n"
      "    COMPREPLY=($(compgen -W \"$opts --help\" -- \"$cur\"))\n"
      "  else\n"
      "    COMPREPLY=($(compgen -f -- \"$cur\"))\n"
      "  fi\n"
      "  return 0\n"
      "}\n"
      "complete -o default -F _distjob_agent distjob-agent torchrun\n");
}

std::string TcshScript(const std::vector<CompletedCommand>& commands) {
  std::vector<std::string> names;
  std::set<std::string> all_options;
  std::vector<std::string> run_options;
  for (const CompletedCommand& c : commands) {
    names.push_back(c.name);
    for (const std::string& o : c.options) all_options.insert(o.substr(2));
    if (c.name == "run") {
      for (const std::string& o : c.options) run_options.push_back(o.substr(2));
    }
  }
  return absl::StrCat("complete distjob-agent 'p/1/(",
                      absl::StrJoin(names, " "), ")/' 'c/--/(",
                      absl::StrJoin(all_options, " "), ")/' 'n/*/f/'\n",
                      "complete torchrun 'c/--/(",
                      absl::StrJoin(run_options, " "), ")/' 'n/*/f/'\n");
}

}  // namespace

absl::StatusOr<std::string> CompletionScript(
    absl::string_view shell, const std::vector<CompletedCommand>& commands) {
  if (shell == "bash") {
    return absl::StrCat("# bash completion for distjob-agent and torchrun\n",
                        BashFunction(commands));
  }
  if (shell == "zsh") {
    // zsh runs the bash function through its bashcompinit layer.
    return absl::StrCat(
        "# zsh completion for distjob-agent and torchrun\n"
        "autoload -U +X compinit && compinit\n"
        "autoload -U +X bashcompinit && bashcompinit\n",
        BashFunction(commands));
  }
  if (shell == "tcsh") return TcshScript(commands);
  return absl::InvalidArgumentError(
      absl::StrCat("'", shell, "' is not one of bash, zsh, tcsh"));
}

std::string CaptureStdout(const std::function<void()>& print) {
  std::fflush(stdout);
  const int saved = dup(STDOUT_FILENO);
  const int capture = memfd_create("help", MFD_CLOEXEC);
  if (saved < 0 || capture < 0) {
    if (saved >= 0) close(saved);
    if (capture >= 0) close(capture);
    return "";
  }
  dup2(capture, STDOUT_FILENO);
  print();
  std::fflush(stdout);
  dup2(saved, STDOUT_FILENO);
  close(saved);
  std::string text;
  char buf[4096];
  ssize_t n;
  lseek(capture, 0, SEEK_SET);
  while ((n = read(capture, buf, sizeof(buf))) > 0) {
    text.append(buf, static_cast<size_t>(n));
  }
  close(capture);
  return text;
}

}  // namespace distjob
