// A worker's torchelastic error file (TORCHELASTIC_ERROR_FILE), whatever
// bytes it holds, through everything agent/report does with it: the message
// it reads back, the termination message (always valid UTF-8, at most the
// kubelet's 4096 bytes) and the agent's own error file.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "agent/report.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string* dir = new std::string(distjob::ScratchDir("error"));
  const std::string worker_file = *dir + "/worker.json";
  const std::string text(reinterpret_cast<const char*>(data), size);
  distjob::WriteScratchFile(worker_file, text);

  (void)distjob::ReadWorkerErrorMessage(worker_file);

  distjob::RunReport report;
  report.outcome = "permanent";
  report.exit_code = 1;
  distjob::RootCause cause;
  cause.local_rank = 3;
  cause.pid = 42;
  cause.exit_code = 1;
  cause.error_file = worker_file;
  report.root_cause = cause;
  const std::string message = distjob::FormatTerminationMessage(report);
  if (message.size() > distjob::kTerminationMessageLimit ||
      distjob::Utf8Truncate(message, message.size()) != message) {
    fprintf(stderr,
            "termination message of %zu bytes is over the limit or "
            "not valid UTF-8\n",
            message.size());
    abort();
  }
  (void)distjob::WriteRootCauseErrorFile(*dir + "/root-cause.json", cause);

  const size_t limit = size == 0 ? 0 : data[0];
  if (distjob::Utf8Truncate(text, limit).size() > limit) {
    fprintf(stderr, "Utf8Truncate went past %zu bytes\n", limit);
    abort();
  }
  return 0;
}
