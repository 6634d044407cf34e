// The store's accept loop reads a connection's first bytes
// (rendezvous/store/server/h2_first_bytes.h) before gRPC does: any bytes give a
// stream in range or a verdict, and more bytes never take a verdict back.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "rendezvous/store/server/h2_first_bytes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string buf(reinterpret_cast<const char*>(data), size);
  const int64_t whole = distjob::FirstHeadersStream(buf);
  if (whole < -1 || whole > 0x7fffffff) std::abort();
  // A prefix answers "wait" (0) or the same verdict as the whole.
  const int64_t part = distjob::FirstHeadersStream(buf.substr(0, size / 2));
  if (part != 0 && part != whole) std::abort();
  return 0;
}
