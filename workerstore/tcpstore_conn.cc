#include "workerstore/tcpstore_conn.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace distjob {

size_t TcpStoreConn::ReadRoom(size_t max_frame_bytes) {
  if (in_off == in_len) in_off = in_len = 0;
  const size_t want = in_len - in_off + kTcpStoreReadChunk;
  if (in.size() - in_off < want) {
    if (in_off > 0) {
      std::memmove(&in[0], in.data() + in_off, in_len - in_off);
      in_len -= in_off;
      in_off = 0;
    }
    if (in.size() < want) {
      // Doubling, but never past one whole frame and a chunk.
      const size_t cap = max_frame_bytes + kTcpStoreReadChunk;
      in.resize(std::max(want, std::min(in.size() * 2, cap)));
    }
  }
  return in.size() - in_len;
}

void TcpStoreConn::LendInput(std::string* read_buffer) {
  if (in_off != in_len || !in.empty()) return;
  in_off = in_len = 0;
  in.swap(*read_buffer);
}

size_t TcpStoreConn::ReturnInput(std::string* read_buffer) {
  const size_t pending = in_len - in_off;
  if (in.empty() || pending > kIdleBufferBytes) return 0;
  if (pending > 0 && in.size() <= kIdleBufferBytes) return 0;
  std::string kept;
  if (pending > 0) {
    // A request in part (maybe one byte, maybe a slow peer's): kept in a
    // small buffer, which grows again as the rest arrives.
    kept.resize(kIdleBufferBytes);
    std::memcpy(&kept[0], in.data() + in_off, pending);
  }
  in_off = 0;
  in_len = pending;
  size_t released = 0;
  if (read_buffer->empty() && in.size() >= kTcpStoreReadChunk &&
      in.size() <= 2 * kTcpStoreReadChunk) {
    in.swap(*read_buffer);
  } else {
    released = in.capacity();
  }
  // Swapped, not move-assigned: assigning an empty (in-place) string keeps
  // the destination's heap buffer, and a drained connection held on to
  // the megabytes its last large frame took.
  in.swap(kept);
  return released;
}

size_t TcpStoreConn::Send() {
  while (out_off < out.size()) {
    const ssize_t n =
        send(fd, out.data() + out_off, out.size() - out_off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      out.clear();
      out_off = 0;
      break;
    }
    out_off += static_cast<size_t>(n);
  }
  if (out_off == out.size()) {
    out.clear();
    out_off = 0;
    // An idle connection keeps a small answer buffer only (a 60 KB get
    // once left 64 KiB on each of thousands of idle connections).
    if (out.capacity() > kIdleBufferBytes) {
      const size_t released = out.capacity();
      std::string().swap(out);
      return released;
    }
  } else if (out_off > out.size() / 2) {
    out.erase(0, out_off);
    out_off = 0;
  }
  return 0;
}

}  // namespace distjob
