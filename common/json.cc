#include "common/json.h"

#include <exception>

#include "absl/strings/str_cat.h"

namespace distjob {

std::string DumpJson(const Json& value, int indent, bool ascii) {
  try {
    return value.dump(indent, ' ', /*ensure_ascii=*/ascii,
                      Json::error_handler_t::replace);
  } catch (const std::exception&) {
    // With the replace handler dump() has nothing left to throw but
    // bad_alloc; "null" still parses where a caller expects JSON.
    return "null";
  }
}

std::string ValidUtf8(absl::string_view text) {
  // nlohmann's own replacement is the one DumpJson applies, so a string
  // cleaned here is written unchanged.
  auto quoted = ParseJson(DumpJson(Json(std::string(text))), "text");
  if (!quoted.ok() || !quoted->is_string()) return "";
  return quoted->get<std::string>();
}

namespace {

// The UTF-16 unit of the \uXXXX escape at text[i] (text[i] == '\\'), or
// -1 when there is none.
int EscapedUnit(absl::string_view text, size_t i) {
  if (i + 6 > text.size() || text[i + 1] != 'u') return -1;
  int unit = 0;
  for (size_t k = i + 2; k < i + 6; ++k) {
    const char c = text[k];
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return -1;
    }
    unit = unit * 16 + digit;
  }
  return unit;
}

// `text` with each escape of a lone surrogate replaced by \ufffd. In JSON a
// backslash appears only inside strings, each starting an escape, so
// escapes are found without tracking strings.
std::string WithoutLoneSurrogates(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\' || i + 1 >= text.size()) {
      out += text[i];
      continue;
    }
    const int unit = EscapedUnit(text, i);
    const bool high = unit >= 0xD800 && unit <= 0xDBFF;
    const bool low = unit >= 0xDC00 && unit <= 0xDFFF;
    if (high && text.size() > i + 6 && text[i + 6] == '\\') {
      const int next = EscapedUnit(text, i + 6);
      if (next >= 0xDC00 && next <= 0xDFFF) {  // a pair: kept
        out.append(text.data() + i, 12);
        i += 11;
        continue;
      }
    }
    if (high || low) {
      out += "\\ufffd";
      i += 5;
      continue;
    }
    out.append(text.data() + i, 2);  // any other escape, \\ included
    ++i;
  }
  return out;
}

}  // namespace

absl::StatusOr<Json> ParseJson(absl::string_view text, absl::string_view what) {
  std::string cleaned;
  if (text.find("\\u") != absl::string_view::npos) {
    cleaned = WithoutLoneSurrogates(text);
    text = cleaned;
  }
  try {
    Json value = Json::parse(text.begin(), text.end(), /*cb=*/nullptr,
                             /*allow_exceptions=*/false);
    if (!value.is_discarded()) return value;
  } catch (const std::exception&) {
  }
  return absl::InvalidArgumentError(absl::StrCat(what, ": not valid JSON"));
}

}  // namespace distjob
