// A trivial worker for the benchmarks, so that the launcher is what is
// measured: it appends "<restart_count> start <ns>" to a file as its first
// act, and, when told to fail in attempt 0, "<restart_count> exit <ns>"
// right before exiting with that code. Times are CLOCK_MONOTONIC, which is
// one clock for every process on the machine.
//
//   stamp FILE [FAIL_CODE_IN_ATTEMPT_0]
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

long long NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void Append(const char* path, const char* restart, const char* what,
            long long ns) {
  char line[128];
  const int n =
      std::snprintf(line, sizeof(line), "%s %s %lld\n", restart, what, ns);
  const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  (void)!write(fd, line, n);  // one write: lines from workers never mix
  close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  const long long start = NowNs();
  if (argc < 2) {
    std::fputs("usage: stamp FILE [FAIL_CODE_IN_ATTEMPT_0]\n", stderr);
    return 2;
  }
  const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  if (restart == nullptr) restart = "0";
  Append(argv[1], restart, "start", start);
  if (argc > 2 && std::strcmp(restart, "0") == 0) {
    const int code = std::atoi(argv[2]);
    Append(argv[1], restart, "exit", NowNs());
    return code;
  }
  return 0;
}
