// The TCPStore-protocol server's frame parser (rendezvous/store/
// tcpstore_protocol.h) over a connection's byte stream: the dialect from
// its first bytes, then frame after frame, each fed as it would arrive in
// pieces. Checks that a frame is never reported longer than its bytes, that
// "need more" always asks for more than it was given, that every view lies
// inside the bytes, and that a frame parses the same whole as in pieces.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "workerstore/tcpstore_protocol.h"

namespace distjob {
namespace tcpstore {
namespace {

void CheckInside(absl::string_view data, absl::string_view v) {
  if (v.empty()) return;
  if (v.data() < data.data() ||
      v.data() + v.size() > data.data() + data.size()) {
    std::abort();
  }
}

void Fuzz(absl::string_view data) {
  ParseLimits limits;
  limits.max_key_bytes = 64;
  limits.max_value_bytes = 512;
  limits.max_keys_per_request = 16;
  limits.max_frame_bytes = 2048;
  Dialect dialect = DetectDialect(data);
  if (dialect == Dialect::kUnknown) return;
  Request r, piece;
  int64_t ignored;
  for (int frames = 0; frames < 256 && !data.empty(); ++frames) {
    const ParseResult p = Parse(dialect, data, limits, &r);
    if (p.kind == ParseResult::kNeedMore) {
      if (p.bytes <= data.size() || p.bytes > limits.max_frame_bytes + 1) {
        std::abort();
      }
      return;
    }
    if (p.kind == ParseResult::kError) {
      if (p.error.empty()) std::abort();
      return;
    }
    if (p.bytes == 0 || p.bytes > data.size()) std::abort();
    const absl::string_view frame = data.substr(0, p.bytes);
    for (absl::string_view k : r.keys) {
      CheckInside(frame, k);
      if (k.size() > limits.max_key_bytes) std::abort();
      ParseStoredInt(k, &ignored);
    }
    for (absl::string_view v : r.values) CheckInside(frame, v);
    // Every prefix of the frame asks for more; the frame alone parses the
    // same.
    for (size_t n = 0; n < frame.size(); n += 1 + frame.size() / 8) {
      if (Parse(dialect, frame.substr(0, n), limits, &piece).kind !=
          ParseResult::kNeedMore) {
        std::abort();
      }
    }
    if (Parse(dialect, frame, limits, &piece).kind != ParseResult::kRequest ||
        piece.op != r.op || piece.keys != r.keys || piece.values != r.values) {
      std::abort();
    }
    // As the server: a type only 2.1 has switches to its numbering.
    dialect = Refine(dialect, r.op);
    data.remove_prefix(p.bytes);
  }
}

}  // namespace
}  // namespace tcpstore
}  // namespace distjob

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  distjob::tcpstore::Fuzz(
      absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
