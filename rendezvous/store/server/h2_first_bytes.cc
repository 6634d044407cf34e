#include "rendezvous/store/server/h2_first_bytes.h"

#include <algorithm>

namespace distjob {

int64_t FirstHeadersStream(const std::string& buf) {
  const size_t head = std::min(buf.size(), kH2PrefaceLen);
  if (buf.compare(0, head, kH2Preface, 0, head) != 0) return -1;
  size_t at = kH2PrefaceLen;
  // A frame: 3 bytes of length, its type, flags, then 4 of stream.
  while (buf.size() >= at + 9) {
    const auto* p = reinterpret_cast<const unsigned char*>(buf.data() + at);
    const size_t len = (size_t{p[0]} << 16) | (size_t{p[1]} << 8) | p[2];
    if (p[3] == 0x1) {  // HEADERS
      return ((uint32_t{p[5]} & 0x7f) << 24) | (uint32_t{p[6]} << 16) |
             (uint32_t{p[7]} << 8) | p[8];
    }
    at += 9 + len;
  }
  return 0;
}

}  // namespace distjob
