#include "common/loopback_testing.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "gtest/gtest.h"

namespace distjob {

int ConnectLoopback(int port, const char* from) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    ADD_FAILURE() << "socket: " << std::strerror(errno);
    return -1;
  }
  sockaddr_in src = {};
  src.sin_family = AF_INET;
  sockaddr_in dst = {};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(static_cast<uint16_t>(port));
  dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (inet_pton(AF_INET, from, &src.sin_addr) != 1 ||
      bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof(src)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof(dst)) != 0) {
    ADD_FAILURE() << "connecting from " << from << " to 127.0.0.1:" << port
                  << ": " << std::strerror(errno);
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace distjob
