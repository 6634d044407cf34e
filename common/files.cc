#include "common/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

namespace distjob {

std::string ReadSmallFile(const std::string& path, size_t max_bytes) {
  std::string text;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buf[4096];
  while (text.size() < max_bytes) {
    const ssize_t n =
        read(fd, buf, std::min(sizeof(buf), max_bytes - text.size()));
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

}  // namespace distjob
