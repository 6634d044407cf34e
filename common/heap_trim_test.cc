#include "common/heap_trim.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(HeapTrimPacerTest, TrimsAfterALargeReleaseAtMostOnceAnInterval) {
  HeapTrimPacer pacer(1000, absl::Seconds(1));
  EXPECT_FALSE(pacer.Due(kT0));  // nothing released
  pacer.Released(999);
  EXPECT_FALSE(pacer.Due(kT0));
  pacer.Released(1);
  EXPECT_TRUE(pacer.Due(kT0));
  EXPECT_FALSE(pacer.Due(kT0));  // the count started again
  pacer.Released(5000);
  EXPECT_FALSE(pacer.Due(kT0 + absl::Milliseconds(999)));
  // Still owed once the interval has passed, with no new release.
  EXPECT_TRUE(pacer.Due(kT0 + absl::Seconds(1)));
}

TEST(HeapTrimPacerTest, TrimHeapRuns) { TrimHeap(); }

}  // namespace
}  // namespace distjob
