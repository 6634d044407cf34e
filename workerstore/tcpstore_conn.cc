#include "workerstore/tcpstore_conn.h"

#include <sys/socket.h>
#include <sys/uio.h>

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

void TcpStoreConn::AppendShared(std::shared_ptr<const std::string> bytes) {
  if (out_off < out.size()) {
    // What `out` holds goes first, as a segment of its own.
    if (out_off > 0) out.erase(0, out_off);
    queued_bytes += out.size();
    queued_capacity += out.capacity();
    queued.push_back({std::move(out), nullptr});
  }
  out = std::string();
  out_off = 0;
  queued_bytes += bytes->size();
  queued.push_back({std::string(), std::move(bytes)});
}

size_t TcpStoreConn::DropOutput() {
  const size_t released = queued_capacity;
  std::vector<TcpStoreOutSegment>().swap(queued);
  queued_head = queued_off = queued_bytes = queued_capacity = 0;
  out.clear();
  out_off = 0;
  return released;
}

size_t TcpStoreConn::Consume(size_t sent) {
  size_t released = 0;
  while (sent > 0 && queued_head < queued.size()) {
    TcpStoreOutSegment& front = queued[queued_head];
    const size_t left = front.bytes().size() - queued_off;
    const size_t n = std::min(sent, left);
    sent -= n;
    queued_bytes -= n;
    if (n < left) {
      queued_off += n;
      break;
    }
    queued_off = 0;
    if (!front.shared) {
      queued_capacity -= front.own.capacity();
      released += front.own.capacity();
    }
    front = TcpStoreOutSegment();  // a stored value's reference goes now
    if (++queued_head == queued.size()) {
      std::vector<TcpStoreOutSegment>().swap(queued);
      queued_head = 0;
    }
  }
  if (queued_head > 64 && 2 * queued_head > queued.size()) {
    // A queue that never drains (a reader always behind) drops the
    // entries it sent rather than grow with them.
    queued.erase(queued.begin(), queued.begin() + queued_head);
    queued_head = 0;
  }
  out_off += sent;
  return released;
}

// The queued segments and then `out`, gathered: the stored values go to
// the socket from their own buffers.
size_t TcpStoreConn::SendQueued() {
  // A 512-key multi_get's values in one call.
  constexpr size_t kMaxSendSegments = 512;
  size_t released = 0;
  while (!queued.empty()) {
    iovec iov[kMaxSendSegments + 1];
    size_t n = 0, off = queued_off, offered = 0;
    for (auto it = queued.begin() + queued_head;
         it != queued.end() && n < kMaxSendSegments; ++it, off = 0) {
      const std::string& b = it->bytes();
      iov[n++] = {const_cast<char*>(b.data()) + off, b.size() - off};
      offered += b.size() - off;
    }
    if (n == queued.size() - queued_head && out_off < out.size()) {
      iov[n++] = {&out[out_off], out.size() - out_off};
      offered += out.size() - out_off;
    }
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = n;
    const ssize_t sent = sendmsg(fd, &m, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return released + DropOutput();
    }
    released += Consume(static_cast<size_t>(sent));
    // A short send: the socket is full, no second call to learn EAGAIN.
    if (static_cast<size_t>(sent) < offered) break;
  }
  return released;
}

size_t TcpStoreConn::Send() {
  size_t released = SendQueued();
  if (!queued.empty()) return released;
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
      released += out.capacity();
      std::string().swap(out);
    }
  } else if (out_off > out.size() / 2) {
    out.erase(0, out_off);
    out_off = 0;
  }
  return released;
}

}  // namespace distjob
