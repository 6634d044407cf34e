// What MPI launchers hand `distjob-agent rsh` (ssh-style options, HOST,
// COMMAND words, as agent/rsh_args parses them) and what the launcher role
// reads of mpirun's own command line (launchers/mpi_env's host options):
// '\0'-separated argv elements. The same bytes, whole, as a hostfile.
#include <cstdint>
#include <string>
#include <vector>

#include "agent/rsh_args.h"
#include "fuzz/fuzz_input.h"
#include "launchers/mpi_env.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> args = distjob::SplitFields(data, size, 256);
  // Only what the sanitizers see matters, not the answers.
  (void)distjob::ParseRshArgs(args);
  (void)distjob::FindMpiHosts(args, {});
  (void)distjob::ParseMpiHostfile(
      std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
