// Reading the small files the agent learns from (sysfs, /etc/hosts, the
// files flags and variables name) and opening the files it writes, never
// blocking on a FIFO or a device.
#ifndef DISTJOB_COMMON_FILES_H_
#define DISTJOB_COMMON_FILES_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

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

// What a stat mode is, for messages: "a FIFO", "a directory", ...
const char* FileKind(unsigned mode);

// "<named_by> '<path>'", the path quoted (control bytes escaped) but
// whole, as every message about an input or output file starts.
std::string FileLabel(absl::string_view named_by, const std::string& path);

// The whole of an input file a flag, variable or operator file names
// (`named_by`: "--peers-file", "KUBEFLOW_TRAINER_SERVER_CA_CERT"). The one
// reader of such files: opened non-blocking, so a FIFO or device cannot
// hang the agent (which holds its signals blocked until the supervisor
// reads them), and refused unless a regular file of at most `max_bytes`.
// InvalidArgument "<named_by> <path>: <why>" (missing, unreadable, a FIFO,
// too large): the caller exits 2 with it.
absl::StatusOr<std::string> ReadInputFile(absl::string_view named_by,
                                          const std::string& path,
                                          size_t max_bytes);

// Whether `path` can be an output file the agent writes (the termination
// log, the error file, the event log): absent, a regular file or a
// character device (/dev/null). A FIFO, socket, directory or block device
// is FailedPrecondition "<named_by> <path>: <kind>; ...": the caller warns
// at start and skips the file, so nothing blocks the exit on it.
absl::Status CheckOutputFile(absl::string_view named_by,
                             const std::string& path);

// Opens `path` for writing with `flags` (O_TRUNC or O_APPEND; O_WRONLY,
// O_CREAT, O_NONBLOCK and O_CLOEXEC are added) without blocking: a FIFO
// without a reader fails at once, one with a reader and any other kind
// CheckOutputFile refuses are closed and FailedPrecondition. The fd.
absl::StatusOr<int> OpenOutputFile(absl::string_view named_by,
                                   const std::string& path, int flags);

}  // namespace distjob

#endif  // DISTJOB_COMMON_FILES_H_
