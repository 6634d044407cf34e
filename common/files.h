// Reading the small files the agent learns from (sysfs, /etc/hosts).
#ifndef DISTJOB_COMMON_FILES_H_
#define DISTJOB_COMMON_FILES_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace distjob {

// The first `max_bytes` of the regular file `path`. Some of these paths are
// named by workers (the progress file, TORCHELASTIC_ERROR_FILE): a FIFO or
// a device there must not block the agent, so the file is opened
// non-blocking and anything but a regular file is FailedPrecondition
// naming `path`; a missing file is NotFound. open/read rather than
// iostreams: the static binary has a size limit.
absl::StatusOr<std::string> ReadSmallRegularFile(const std::string& path,
                                                 size_t max_bytes = size_t{1}
                                                                    << 20);

// ReadSmallRegularFile's text, or "" when it cannot be read.
std::string ReadSmallFile(const std::string& path,
                          size_t max_bytes = size_t{1} << 20);

}  // namespace distjob

#endif  // DISTJOB_COMMON_FILES_H_
