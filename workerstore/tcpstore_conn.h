// One client connection of the workers' TCPStore server: its socket, the
// requests it sent that are not served yet, the answers it has not read
// yet, and its parked waits. Apart from the server's loop so that how a
// connection's buffers grow and shrink (the memory that max_buffered_bytes
// bounds) is in one place: an idle connection holds at most
// kIdleBufferBytes of them (9,000 idle connections once held 128 KiB each).
#ifndef DISTJOB_WORKERSTORE_TCPSTORE_CONN_H_
#define DISTJOB_WORKERSTORE_TCPSTORE_CONN_H_

#include <sys/epoll.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "workerstore/tcpstore_data.h"
#include "workerstore/tcpstore_protocol.h"

namespace distjob {

// One read's room at least.
inline constexpr size_t kTcpStoreReadChunk = 64 * 1024;
// What a drained connection keeps of its answer buffer for reuse; its
// request buffer it gives back (to the loop's one read buffer, or to the
// allocator).
inline constexpr size_t kIdleBufferBytes = 4096;
// A connection's own bookkeeping, counted against max_buffered_bytes with
// its buffers: the Conn, its address strings, its entries in the maps.
inline constexpr size_t kConnBytes = 1024;

// Part of an answer queued before `out`'s bytes: bytes of its own, or a
// stored value's (shared, not copied: TcpStoreValue).
struct TcpStoreOutSegment {
  std::string own;
  std::shared_ptr<const std::string> shared;
  const std::string& bytes() const { return shared ? *shared : own; }
};

struct TcpStoreConn {
  uint64_t id = 0;
  int fd = -1;
  std::string peer;  // address:port, for logs
  std::string ip;
  tcpstore::Dialect dialect = tcpstore::Dialect::kUnknown;
  // Received bytes [in_off, in_len) of `in` (whose size is its capacity).
  std::string in;
  size_t in_off = 0;
  size_t in_len = 0;
  size_t need = 1;  // parse again once this many bytes are buffered
  // Answers not yet sent: the segments of `queued` from queued_head (that
  // one from queued_off), then `out` from out_off. Small answers are
  // appended to `out`; AppendShared queues a stored value behind what
  // `out` holds. A vector, emptied and freed once sent: an empty
  // std::deque allocates its first block (~600 bytes) for every
  // connection.
  std::vector<TcpStoreOutSegment> queued;
  size_t queued_head = 0;
  size_t queued_off = 0;
  size_t queued_bytes = 0;     // unsent bytes of `queued`
  size_t queued_capacity = 0;  // the own buffers' capacity in `queued`
  std::string out;
  size_t out_off = 0;
  bool reading = true;                  // EPOLLIN registered
  uint32_t events = EPOLLIN;            // registered with epoll
  bool dirty = false;                   // in the loop's list to flush
  absl::flat_hash_set<uint64_t> waits;  // parked waits
  size_t accounted = 0;                 // its buffers, as counted by the loop

  // Makes room after in_len for one more chunk and returns it. A large
  // frame grows the buffer by doubling as it arrives (never past one
  // whole frame of `max_frame_bytes` and a chunk), not at once from what
  // its header claims.
  size_t ReadRoom(size_t max_frame_bytes);
  // With nothing buffered, takes the loop's `read_buffer` as its request
  // buffer, so that idle connections hold none.
  void LendInput(std::string* read_buffer);
  // After a read: a drained connection gives its request buffer back (to
  // `read_buffer` when that is empty and the buffer of a usual size); one
  // with a small request in part keeps it in kIdleBufferBytes. Returns the
  // bytes handed back to the allocator.
  size_t ReturnInput(std::string* read_buffer);
  // Queues `bytes` (a stored value's wire form) after every answer so far,
  // without copying them; they stay alive until sent.
  void AppendShared(std::shared_ptr<const std::string> bytes);
  // A stored value as an answer: by reference when it is shared, else
  // copied (TcpStoreValue).
  void AppendValue(const TcpStoreValue& v) {
    if (v.shared()) return AppendShared(v.shared());
    out.append(v.wire().data(), v.wire().size());
  }
  // Sends what the socket takes of the queued segments and `out` (one
  // sendmsg gathers up to kMaxSendSegments of them); on a send error drops
  // the rest (the read side sees the error too and closes the
  // connection). Returns the bytes of answer buffer handed back to the
  // allocator.
  size_t Send();
  size_t PendingOutput() const { return queued_bytes + out.size() - out_off; }
  // What it holds, as counted against max_buffered_bytes: its own buffers
  // and each queued segment, but not a shared value's bytes, which are the
  // store's (counted in max_total_bytes). A value overwritten or deleted
  // while an answer still refers to it is held beyond both until sent:
  // at most max_pending_output_bytes a connection.
  size_t Holds() const {
    return kConnBytes + in.capacity() + out.capacity() + queued_capacity +
           queued.capacity() * sizeof(TcpStoreOutSegment);
  }

 private:
  size_t SendQueued();
  // Drops `sent` bytes from the front of the queued segments, then `out`;
  // returns the own buffers' capacity released.
  size_t Consume(size_t sent);
  // Drops every unsent answer (a send error); returns the capacity.
  size_t DropOutput();
};

}  // namespace distjob

#endif  // DISTJOB_WORKERSTORE_TCPSTORE_CONN_H_
