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

absl::StatusOr<Json> ParseJson(absl::string_view text, absl::string_view what) {
  try {
    Json value = Json::parse(text.begin(), text.end(), /*cb=*/nullptr,
                             /*allow_exceptions=*/false);
    if (!value.is_discarded()) return value;
  } catch (const std::exception&) {
  }
  return absl::InvalidArgumentError(absl::StrCat(what, ": not valid JSON"));
}

}  // namespace distjob
