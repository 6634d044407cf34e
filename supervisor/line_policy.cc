#include "supervisor/line_policy.h"

#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace distjob {

Json WorkerLineJsonFields(int rank, int local_rank, absl::string_view stream) {
  return Json{{"rank", rank},
              {"local_rank", local_rank},
              {"stream", std::string(stream)}};
}

bool ShouldDuplicate(const LinePolicy& policy, absl::string_view line) {
  if (policy.duplicate_fd < 0) return false;
  for (const std::string& filter : policy.duplicate_filters) {
    if (absl::StrContains(line, filter)) return true;
  }
  return false;
}

absl::StatusOr<std::set<int>> ParseLocalRanksFilter(absl::string_view value) {
  std::set<int> ranks;
  if (absl::StripAsciiWhitespace(value).empty()) return ranks;
  for (absl::string_view r : absl::StrSplit(value, ',')) {
    int rank = -1;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(r), &rank) || rank < 0 ||
        rank > (1 << 20)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", value,
                       "' is not a comma-separated list of local ranks "
                       "(integers >= 0, e.g. 0,3)"));
    }
    ranks.insert(rank);
  }
  return ranks;
}

std::vector<std::string> ParseDuplicateFilters(absl::string_view value) {
  std::vector<std::string> filters;
  std::string current;
  for (size_t i = 0; i < value.size(); ++i) {
    if (value[i] != ',') {
      current.push_back(value[i]);
    } else if (i + 1 < value.size() && value[i + 1] == ',') {
      current.push_back(',');
      ++i;
    } else {
      if (!current.empty()) filters.push_back(current);
      current.clear();
    }
  }
  if (!current.empty()) filters.push_back(current);
  return filters;
}

std::string RenderLinePrefix(absl::string_view templ,
                             const PrefixFields& fields) {
  if (templ.empty()) {
    return absl::StrCat("[", fields.role_name, fields.local_rank, "]:");
  }
  auto value = [&](absl::string_view name, std::string* out) {
    if (name == "role_name") {
      *out = fields.role_name;
    } else if (name == "local_rank") {
      *out = absl::StrCat(fields.local_rank);
    } else if (name == "rank") {
      *out = absl::StrCat(fields.rank);
    } else if (name == "hostname") {
      *out = fields.hostname;
    } else {
      return false;
    }
    return true;
  };
  auto is_ident = [](char c, bool first) {
    return c == '_' || std::isalpha(static_cast<unsigned char>(c)) ||
           (!first && std::isdigit(static_cast<unsigned char>(c)));
  };
  std::string out;
  for (size_t i = 0; i < templ.size(); ++i) {
    if (templ[i] != '$' || i + 1 >= templ.size()) {
      out.push_back(templ[i]);
      continue;
    }
    if (templ[i + 1] == '$') {
      out.push_back('$');
      ++i;
      continue;
    }
    std::string replacement;
    if (templ[i + 1] == '{') {
      const size_t close = templ.find('}', i + 2);
      if (close != absl::string_view::npos &&
          value(templ.substr(i + 2, close - i - 2), &replacement)) {
        out += replacement;
        i = close;
        continue;
      }
    } else if (is_ident(templ[i + 1], true)) {
      size_t end = i + 2;
      while (end < templ.size() && is_ident(templ[end], false)) ++end;
      if (value(templ.substr(i + 1, end - i - 1), &replacement)) {
        out += replacement;
        i = end - 1;
        continue;
      }
    }
    out.push_back('$');
  }
  return out;
}

StreamPlan PlanStreams(int redirect, int tee, bool shown) {
  StreamPlan plan;
  if (shown) {
    plan.redirect = redirect & ~tee;
    plan.tee = tee;
    return plan;
  }
  plan.redirect = redirect | tee;
  plan.discard = 3 & ~plan.redirect;
  return plan;
}

bool RankShown(const std::set<int>& filter, int local_rank) {
  return filter.empty() || filter.count(local_rank) > 0;
}

}  // namespace distjob
