#include "common/heap_trim.h"

#include <malloc.h>

namespace distjob {

bool HeapTrimPacer::Due(absl::Time now) {
  if (released_ < threshold_ || now - last_ < interval_) return false;
  released_ = 0;
  last_ = now;
  return true;
}

void TrimHeap() { malloc_trim(0); }

}  // namespace distjob
