#include "supervisor/signal_names.h"

#include <csignal>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace distjob {
namespace {

struct NamedSignal {
  const char* name;
  int number;
};

constexpr NamedSignal kSignals[] = {
    {"SIGHUP", SIGHUP},       {"SIGINT", SIGINT},       {"SIGQUIT", SIGQUIT},
    {"SIGILL", SIGILL},       {"SIGTRAP", SIGTRAP},     {"SIGABRT", SIGABRT},
    {"SIGBUS", SIGBUS},       {"SIGFPE", SIGFPE},       {"SIGKILL", SIGKILL},
    {"SIGUSR1", SIGUSR1},     {"SIGSEGV", SIGSEGV},     {"SIGUSR2", SIGUSR2},
    {"SIGPIPE", SIGPIPE},     {"SIGALRM", SIGALRM},     {"SIGTERM", SIGTERM},
    {"SIGSTKFLT", SIGSTKFLT}, {"SIGCHLD", SIGCHLD},     {"SIGCONT", SIGCONT},
    {"SIGSTOP", SIGSTOP},     {"SIGTSTP", SIGTSTP},     {"SIGTTIN", SIGTTIN},
    {"SIGTTOU", SIGTTOU},     {"SIGURG", SIGURG},       {"SIGXCPU", SIGXCPU},
    {"SIGXFSZ", SIGXFSZ},     {"SIGVTALRM", SIGVTALRM}, {"SIGPROF", SIGPROF},
    {"SIGWINCH", SIGWINCH},   {"SIGIO", SIGIO},         {"SIGPWR", SIGPWR},
    {"SIGSYS", SIGSYS},
};

}  // namespace

std::string SignalName(int signal_number) {
  for (const NamedSignal& s : kSignals) {
    if (s.number == signal_number) return s.name;
  }
  if (signal_number >= SIGRTMIN && signal_number <= SIGRTMAX) {
    return absl::StrCat("SIGRTMIN+", signal_number - SIGRTMIN);
  }
  return absl::StrCat("signal ", signal_number);
}

absl::StatusOr<int> ParseSignal(absl::string_view text) {
  std::string name = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(text));
  int number = 0;
  if (absl::SimpleAtoi(name, &number)) {
    if (number >= 1 && number <= SIGRTMAX) return number;
  } else {
    if (!absl::StartsWith(name, "SIG")) name = "SIG" + name;
    for (const NamedSignal& s : kSignals) {
      if (name == s.name) return s.number;
    }
    if (name == "SIGRTMIN") return SIGRTMIN;
    if (name == "SIGRTMAX") return SIGRTMAX;
    if (absl::StartsWith(name, "SIGRTMIN+") &&
        absl::SimpleAtoi(name.substr(9), &number) && number >= 0 &&
        SIGRTMIN + number <= SIGRTMAX) {
      return SIGRTMIN + number;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", text,
                   "' is not a signal; use a name (SIGTERM, TERM, "
                   "SIGRTMIN+2) or a number 1-",
                   SIGRTMAX));
}

absl::StatusOr<std::vector<int>> ParseSignalList(absl::string_view text) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    auto s = ParseSignal(part);
    if (!s.ok()) return s.status();
    out.push_back(*s);
  }
  return out;
}

}  // namespace distjob
