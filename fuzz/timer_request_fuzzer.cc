// A FileTimer request line (supervisor/timer_request): what any process that
// can open TORCHELASTIC_TIMER_FILE writes, fed to the timer table so its
// bookkeeping sees whatever the parser lets through.
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "supervisor/timer_request.h"
#include "supervisor/timer_table.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  distjob::TimerTable table(distjob::TimerLimits{8, 16});
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    auto request = distjob::ParseTimerRequest(text.substr(0, nl));
    if (request.ok()) table.Apply(*request);
    if (nl == absl::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  (void)table.TakeExpired(absl::FromUnixSeconds(2000000000));
  return 0;
}
