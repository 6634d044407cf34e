#include "common/text.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace distjob {

std::string QuoteForMessage(absl::string_view value, size_t max_bytes) {
  if (value.size() <= max_bytes) {
    return absl::StrCat("'", absl::CHexEscape(value), "'");
  }
  return absl::StrCat("'", absl::CHexEscape(value.substr(0, max_bytes)),
                      "...' (", value.size(), " bytes)");
}

std::string OneLine(absl::string_view message, size_t max_bytes) {
  std::string out;
  const absl::string_view shown = message.substr(0, max_bytes);
  out.reserve(shown.size());
  for (const char c : shown) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      absl::StrAppendFormat(&out, "\\x%02x", u);
    } else {
      out += c;
    }
  }
  if (message.size() > max_bytes) {
    absl::StrAppend(&out, "... (", message.size(), " bytes)");
  }
  return out;
}

}  // namespace distjob
