#include "common/files.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/errno_status.h"

namespace distjob {

absl::StatusOr<std::string> ReadSmallRegularFile(const std::string& path,
                                                 size_t max_bytes) {
  int fd;
  do {
    fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoError(errno, absl::StrCat("open ", path));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int error = errno;
    close(fd);
    return ErrnoError(error, absl::StrCat("fstat ", path));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": not a regular file; not read"));
  }
  std::string text;
  char buf[4096];
  while (text.size() < max_bytes) {
    const ssize_t n =
        read(fd, buf, std::min(sizeof(buf), max_bytes - text.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

std::string ReadSmallFile(const std::string& path, size_t max_bytes) {
  absl::StatusOr<std::string> text = ReadSmallRegularFile(path, max_bytes);
  return text.ok() ? *std::move(text) : std::string();
}

}  // namespace distjob
