#include "common/errno_status.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace distjob {

absl::Status ErrnoError(int error_number, absl::string_view what) {
  return absl::ErrnoToStatus(
      error_number, absl::StrCat(what, ": ", std::strerror(error_number)));
}

}  // namespace distjob
