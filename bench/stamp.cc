// A trivial worker for the benchmarks, so that the launcher is what is
// measured: it appends "<restart_count> start <ns>" to a file as its first
// act, and, when told to fail in attempt 0, "<restart_count> exit <ns>"
// right before exiting with that code. Times are CLOCK_MONOTONIC, which is
// one clock for every process on the machine.
//
//   stamp FILE [FAIL_CODE_IN_ATTEMPT_0 [HOLD_DIR]]
//
// With HOLD_DIR the worker stays up after its stamp, like a training step
// would, until HOLD_DIR/go exists (exit 0); it exits 134 (SIGABRT's code,
// as from NCCL's abort) once HOLD_DIR/fail appears, standing in for a
// collective that fails when a peer dies (torchrun 1.13 notices a lost
// peer only that way). A worker started after
// the failure does not fail again: it is the successor being timed. A code
// of 0 means "do not fail in attempt 0".
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

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
  const char* hold = argc > 3 ? argv[3] : nullptr;
  const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  if (restart == nullptr) restart = "0";
  Append(argv[1], restart, "start", start);
  const bool first = std::strcmp(restart, "0") == 0;
  if (argc > 2 && first && std::atoi(argv[2]) != 0) {
    const int code = std::atoi(argv[2]);
    Append(argv[1], restart, "exit", NowNs());
    return code;
  }
  if (hold == nullptr) return 0;
  const std::string go = std::string(hold) + "/go";
  const std::string fail = std::string(hold) + "/fail";
  const bool failed_before = access(fail.c_str(), F_OK) == 0;
  const timespec tick = {0, 2000000};  // 2 ms: the poll adds <= 2 ms
  for (;;) {
    if (access(go.c_str(), F_OK) == 0) return 0;
    if (!failed_before && access(fail.c_str(), F_OK) == 0) {
      Append(argv[1], restart, "exit", NowNs());
      return 134;
    }
    nanosleep(&tick, nullptr);
  }
}
