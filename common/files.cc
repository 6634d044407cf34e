#include "common/files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/text.h"

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

const char* FileKind(unsigned mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string FileLabel(absl::string_view named_by, const std::string& path) {
  return absl::StrCat(named_by, " ", QuoteForMessage(path, PATH_MAX));
}

absl::StatusOr<std::string> ReadInputFile(absl::string_view named_by,
                                          const std::string& path,
                                          size_t max_bytes) {
  const std::string what = FileLabel(named_by, path);
  int fd;
  do {
    fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": cannot open: ", strerror(errno)));
  }
  absl::Cleanup close_fd = [fd] { close(fd); };
  struct stat st;
  if (fstat(fd, &st) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": cannot stat: ", strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", FileKind(st.st_mode), ", not a regular file; not read"));
  }
  const std::string too_big =
      absl::StrCat(what, ": larger than the ", max_bytes, " bytes accepted");
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return absl::InvalidArgumentError(too_big);
  }
  std::string text;
  char buf[8192];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": cannot read: ", strerror(errno)));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    // The file may grow after the fstat (a log named by mistake).
    if (text.size() > max_bytes) return absl::InvalidArgumentError(too_big);
  }
  return text;
}

namespace {

bool Writable(unsigned mode) { return S_ISREG(mode) || S_ISCHR(mode); }

absl::Status Unwritable(absl::string_view named_by, const std::string& path,
                        unsigned mode) {
  return absl::FailedPreconditionError(absl::StrCat(
      FileLabel(named_by, path), ": ", FileKind(mode),
      ", not a regular file; not written (a FIFO would block the agent)"));
}

}  // namespace

absl::Status CheckOutputFile(absl::string_view named_by,
                             const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || Writable(st.st_mode)) {
    return absl::OkStatus();  // absent (created later) or usable
  }
  return Unwritable(named_by, path, st.st_mode);
}

absl::StatusOr<int> OpenOutputFile(absl::string_view named_by,
                                   const std::string& path, int flags) {
  int fd;
  do {
    fd = open(path.c_str(),
              flags | O_WRONLY | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
              0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    if (errno == ENXIO) {  // a FIFO nobody reads
      return Unwritable(named_by, path, S_IFIFO);
    }
    return ErrnoError(errno,
                      absl::StrCat(FileLabel(named_by, path), ": cannot open"));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !Writable(st.st_mode)) {
    const unsigned mode = st.st_mode;
    close(fd);
    return Unwritable(named_by, path, mode);
  }
  return fd;
}

std::string ReadSmallFile(const std::string& path, size_t max_bytes) {
  absl::StatusOr<std::string> text = ReadSmallRegularFile(path, max_bytes);
  return text.ok() ? *std::move(text) : std::string();
}

}  // namespace distjob
