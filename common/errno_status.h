// absl::ErrnoToStatus at syscalls, with a message that names what was tried.
#ifndef DISTJOB_COMMON_ERRNO_STATUS_H_
#define DISTJOB_COMMON_ERRNO_STATUS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace distjob {

// Returns absl::ErrnoToStatus(error_number, "<what>: <strerror>").
absl::Status ErrnoError(int error_number, absl::string_view what);

}  // namespace distjob

#endif  // DISTJOB_COMMON_ERRNO_STATUS_H_
