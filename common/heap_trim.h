// When a long-running server hands freed memory back to the kernel.
// glibc's free() keeps what lies below the top of its heaps: after a flood
// of connections has come and gone, the agent's RSS stayed at 1 GB though
// it held 60 KB. malloc_trim(0) returns the free pages of every arena, but
// it walks them all, so it runs only after a large release, and at most
// once per interval. Not thread-safe (one event loop's).
#ifndef DISTJOB_COMMON_HEAP_TRIM_H_
#define DISTJOB_COMMON_HEAP_TRIM_H_

#include <cstddef>

#include "absl/time/time.h"

namespace distjob {

class HeapTrimPacer {
 public:
  HeapTrimPacer(size_t threshold_bytes, absl::Duration interval)
      : threshold_(threshold_bytes), interval_(interval) {}

  // `bytes` were freed (buffers released, connections closed).
  void Released(size_t bytes) { released_ += bytes; }
  // Whether to trim at `now`: threshold_bytes released since the last
  // trim, which is an interval old. When true the count starts again.
  bool Due(absl::Time now);

 private:
  const size_t threshold_;
  const absl::Duration interval_;
  size_t released_ = 0;
  absl::Time last_ = absl::InfinitePast();
};

// malloc_trim(0): every arena's free pages back to the kernel.
void TrimHeap();

}  // namespace distjob

#endif  // DISTJOB_COMMON_HEAP_TRIM_H_
