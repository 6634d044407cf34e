#include "observability/process_metrics.h"

#include <dirent.h>
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/files.h"

// AddressSanitizer's allocator stands in for glibc's in sanitizer builds
// (gcc says so by __SANITIZE_ADDRESS__, clang by __has_feature).
#if defined(__SANITIZE_ADDRESS__)
#define DISTJOB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DISTJOB_ASAN 1
#endif
#endif
#ifdef DISTJOB_ASAN
// The sanitizer runtime's (compiler-rt's allocator_interface.h, which
// Debian's gcc does not ship).
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#endif

namespace distjob {
namespace {

double ResidentBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long size = 0, resident = 0;
  const int read = std::fscanf(f, "%ld %ld", &size, &resident);
  std::fclose(f);
  if (read != 2) return 0;
  return static_cast<double>(resident) *
         static_cast<double>(sysconf(_SC_PAGESIZE));
}

double CpuSeconds() {
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// The boot time (btime of /proc/stat) plus the process' start in clock
// ticks after boot (field 22 of /proc/self/stat), as client_golang does.
double StartTimeSeconds() {
  const std::string stat = ReadSmallFile("/proc/self/stat");
  const std::string system = ReadSmallFile("/proc/stat");
  // The command name (field 2) may hold spaces: count from its ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::vector<std::string> fields =
      absl::StrSplit(stat.substr(close + 1), ' ', absl::SkipEmpty());
  // fields[0] is field 3 (state), so field 22 is fields[19].
  double ticks = 0;
  if (fields.size() < 20 || !absl::SimpleAtod(fields[19], &ticks)) return 0;
  double boot = 0;
  for (absl::string_view line : absl::StrSplit(system, '\n')) {
    if (absl::ConsumePrefix(&line, "btime ") && absl::SimpleAtod(line, &boot)) {
      return boot + ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
    }
  }
  return 0;
}

double OpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  double count = 0;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') count += 1;
  }
  closedir(dir);
  return count - 1;  // the directory's own descriptor
}

double MaxFds() {
  struct rlimit limit {};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  return static_cast<double>(limit.rlim_cur);
}

double HeapInUseBytes() {
#ifdef DISTJOB_ASAN
  return static_cast<double>(__sanitizer_get_current_allocated_bytes());
#else
  const struct mallinfo2 info = mallinfo2();
  return static_cast<double>(info.uordblks) + static_cast<double>(info.hblkhd);
#endif
}

void Family(std::string* out, const char* name, const char* type,
            const char* help, const std::string& labels, double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.15g", value);
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type,
                  "\n", name, labels, " ", text, "\n");
}

}  // namespace

ProcessSample SampleProcess() {
  ProcessSample s;
  s.cpu_seconds = CpuSeconds();
  s.resident_bytes = ResidentBytes();
  s.start_time_seconds = StartTimeSeconds();
  s.open_fds = OpenFds();
  s.max_fds = MaxFds();
  s.heap_in_use_bytes = HeapInUseBytes();
  return s;
}

std::string RenderProcessMetrics(const ProcessSample& s,
                                 const std::string& labels) {
  std::string out;
  Family(&out, "process_cpu_seconds_total", "counter",
         "CPU time the agent itself used (user and system), workers not "
         "included.",
         labels, s.cpu_seconds);
  Family(&out, "process_resident_memory_bytes", "gauge",
         "The agent's own resident set size.", labels, s.resident_bytes);
  Family(&out, "process_start_time_seconds", "gauge",
         "When the agent started, in seconds since the Unix epoch.", labels,
         s.start_time_seconds);
  Family(&out, "process_open_fds", "gauge",
         "File descriptors the agent has open.", labels, s.open_fds);
  Family(&out, "process_max_fds", "gauge",
         "The agent's open-file limit (soft RLIMIT_NOFILE).", labels,
         s.max_fds);
  Family(&out, "distjob_heap_in_use_bytes", "gauge",
         "Memory in use by the agent's allocations: what its allocator "
         "handed out and has not had back, in every arena and in mmapped "
         "blocks (not the binary, thread stacks or free memory malloc "
         "keeps).",
         labels, s.heap_in_use_bytes);
  return out;
}

}  // namespace distjob
