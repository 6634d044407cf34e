#include "agent/cli/flag_parser.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/duration.h"
#include "common/net.h"
#include "common/text.h"

namespace distjob {

namespace {

std::string EnvName(absl::string_view prefix, absl::string_view name) {
  std::string var = absl::StrCat(prefix, absl::AsciiStrToUpper(name));
  std::replace(var.begin(), var.end(), '-', '_');
  return var;
}

// A value as the user wrote it when that fits on a line; quoted, escaped
// and cut otherwise.
std::string ShownValue(absl::string_view value) {
  const bool plain = value.size() <= 80 &&
                     std::all_of(value.begin(), value.end(),
                                 [](char c) { return c >= ' ' && c < 0x7f; });
  return plain ? std::string(value) : QuoteForMessage(value);
}

}  // namespace

Flag TorchrunFlag(const std::string& name, std::string metavar,
                  std::string help, FlagSetter set, bool is_bool,
                  const std::string& short_name) {
  Flag flag;
  flag.names = {name};
  if (!short_name.empty()) flag.names.push_back(short_name);
  flag.env = {EnvName("PET_", name)};
  flag.metavar = std::move(metavar);
  flag.help = std::move(help);
  flag.set = std::move(set);
  flag.is_bool = is_bool;
  return flag;
}

Flag AgentFlag(const std::string& name, std::string metavar, std::string help,
               FlagSetter set, bool is_bool) {
  Flag flag = TorchrunFlag(name, std::move(metavar), std::move(help),
                           std::move(set), is_bool);
  flag.env = {EnvName("DISTJOB_", name)};
  return flag;
}

FlagSetter SetString(std::string* out) {
  return [out](absl::string_view v, absl::string_view) {
    *out = std::string(v);
    return absl::OkStatus();
  };
}

FlagSetter SetBool(bool* out) {
  return [out](absl::string_view v, absl::string_view) {
    *out = v != "0";
    return absl::OkStatus();
  };
}

FlagSetter SetInt(int* out, int min, int max) {
  return [out, min, max](absl::string_view v, absl::string_view) {
    auto n = ParseInt(v, min, max);
    if (!n.ok()) return n.status();
    *out = *n;
    return absl::OkStatus();
  };
}

FlagSetter SetDuration(absl::Duration* out) {
  return [out](absl::string_view v, absl::string_view) {
    auto d = ParseDuration(v, "value");
    if (!d.ok()) return d.status();
    *out = *d;
    return absl::OkStatus();
  };
}

FlagSetter SetHostName(std::string* out) {
  return [out](absl::string_view v, absl::string_view) {
    if (absl::Status s = CheckHostName(v, "value"); !s.ok()) return s;
    *out = std::string(v);
    return absl::OkStatus();
  };
}

std::string CanonicalFlagName(absl::string_view name) {
  std::string out(name);
  std::replace(out.begin(), out.end(), '_', '-');
  return out;
}

void FlagSet::Add(Flag flag) { flags_.push_back(std::move(flag)); }

const Flag* FlagSet::Find(absl::string_view name) const {
  const std::string canonical = CanonicalFlagName(name);
  for (const Flag& flag : flags_) {
    for (const std::string& n : flag.names) {
      if (n == canonical) return &flag;
    }
  }
  return nullptr;
}

absl::StatusOr<const Flag*> FlagSet::FindLong(absl::string_view name) const {
  if (const Flag* exact = Find(name)) return exact;
  // argparse's allow_abbrev, which torchrun keeps: a unique prefix of a long
  // option is that option.
  const std::string canonical = CanonicalFlagName(name);
  std::vector<const Flag*> matches;
  std::vector<std::string> shown;
  for (const Flag& flag : flags_) {
    for (const std::string& n : flag.names) {
      if (n.size() > 1 && !canonical.empty() &&
          absl::StartsWith(n, canonical)) {
        matches.push_back(&flag);
        shown.push_back("--" + n);
        break;
      }
    }
  }
  if (matches.size() == 1) return matches[0];
  if (matches.empty()) return nullptr;
  return absl::InvalidArgumentError(absl::StrCat("ambiguous option '--", name,
                                                 "' could match ",
                                                 absl::StrJoin(shown, ", ")));
}

namespace {

// An option as written: -x, -xVALUE, -x=VALUE, --name or --name=VALUE.
struct WrittenOption {
  std::string name;
  std::string value;
  bool has_inline_value = false;
  bool is_long = false;
  std::string shown;  // as written, without its inline value
};

WrittenOption SplitOption(const std::string& arg) {
  WrittenOption o;
  o.is_long = absl::StartsWith(arg, "--");
  if (o.is_long) {
    const size_t eq = arg.find('=');
    o.name =
        arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    if (eq != std::string::npos) {
      o.value = arg.substr(eq + 1);
      o.has_inline_value = true;
    }
  } else {
    o.name = arg.substr(1, 1);
    if (arg.size() > 2) {
      o.value = arg.substr(arg[2] == '=' ? 3 : 2);
      o.has_inline_value = true;
    }
  }
  o.shown = arg.substr(0, arg.find('='));
  return o;
}

}  // namespace

absl::Status FlagSet::ApplyEnv(const EnvMap& env) const {
  for (const Flag& flag : flags_) {
    for (const std::string& var : flag.env) {
      auto value = Lookup(env, var);
      if (!value.has_value()) continue;
      std::string effective = *value;
      absl::Status s;
      if (flag.is_bool) {
        auto b = ParseBool(*value);
        if (b.ok()) {
          effective = *b ? "" : "0";
        } else {
          s = b.status();
        }
      }
      if (s.ok()) s = flag.set(effective, var);
      if (!s.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("environment variable ", var, "=", ShownValue(*value),
                         ": ", s.message()));
      }
      break;
    }
  }
  return absl::OkStatus();
}

absl::Status FlagSet::ApplyOption(const std::vector<std::string>& args,
                                  size_t* i) const {
  WrittenOption o = SplitOption(args[*i]);
  const Flag* flag = nullptr;
  if (o.is_long) {
    auto found = FindLong(o.name);
    if (!found.ok()) return found.status();
    flag = *found;
  } else {
    flag = Find(o.name);
  }
  if (flag == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown option '", o.shown, "'; see --help for the accepted options"));
  }
  if (flag->is_bool) {
    if (o.has_inline_value) {
      auto b = ParseBool(o.value);
      if (!b.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("option ", o.shown, ": ", b.status().message()));
      }
      o.value = *b ? "" : "0";
    }
  } else if (!o.has_inline_value) {
    if (*i + 1 >= args.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "option ", o.shown, " needs a value (", flag->metavar, ")"));
    }
    o.value = args[++*i];
  }
  absl::Status s = flag->set(o.value, o.shown);
  if (!s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("option ", o.shown, ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> FlagSet::Parse(
    const std::vector<std::string>& args, const EnvMap& env) const {
  // Environment first, so the command line overrides it.
  if (absl::Status s = ApplyEnv(env); !s.ok()) return s;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      return std::vector<std::string>(args.begin() + i + 1, args.end());
    }
    if (arg.size() < 2 || arg[0] != '-' || arg == "-") {
      return std::vector<std::string>(args.begin() + i, args.end());
    }
    if (absl::Status s = ApplyOption(args, &i); !s.ok()) return s;
  }
  return std::vector<std::string>();
}

std::string FlagSet::Help() const {
  std::string out = usage_ + "\n\nOptions:\n";
  for (const Flag& flag : flags_) {
    std::vector<std::string> spellings;
    for (const std::string& n : flag.names) {
      if (n.size() == 1) {
        spellings.push_back("-" + n);
      } else {
        spellings.push_back("--" + n);
      }
    }
    std::string line = "  " + absl::StrJoin(spellings, ", ");
    if (!flag.is_bool) absl::StrAppend(&line, " ", flag.metavar);
    absl::StrAppend(&out, line, "\n      ", flag.help);
    if (!flag.env.empty()) {
      absl::StrAppend(&out, " [env: ", absl::StrJoin(flag.env, ", "), "]");
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

absl::StatusOr<int> ParseInt(absl::string_view value, int min, int max) {
  int n = 0;
  if (!absl::SimpleAtoi(value, &n) || n < min || n > max) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", value, "' is not an integer in [", min, ", ", max, "]"));
  }
  return n;
}

absl::StatusOr<bool> ParseBool(absl::string_view value) {
  const std::string lower = absl::AsciiStrToLower(value);
  if (lower.empty() || lower == "1" || lower == "true" || lower == "yes") {
    return true;
  }
  if (lower == "0" || lower == "false" || lower == "no") return false;
  return absl::InvalidArgumentError(absl::StrCat(
      "'", value, "' is not a boolean; use 1/true/yes or 0/false/no"));
}

}  // namespace distjob
