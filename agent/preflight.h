// The checks of `distjob-agent preflight`: what this pod will need before
// it joins a job (names, the rendezvous endpoint, ports, paths, devices,
// InfiniBand ports, the node health daemon), each bounded in time and
// ended early by `cancelled` (a stop signal) within about 100 ms. Each
// result carries a KEP-3416 class (Kubeflow's init-container result
// codes): the worst one is the exit code.
#ifndef DISTJOB_AGENT_PREFLIGHT_H_
#define DISTJOB_AGENT_PREFLIGHT_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/json.h"

namespace distjob {

// KEP-3416's classes, which are also the exit codes.
enum class PreflightClass {
  kPass = 0,
  kWarning = 10,    // run anyway, but say so
  kRetryable = 20,  // this node or this moment: try again (elsewhere)
  kFatal = 30,      // the job as given cannot run: do not retry
};
const char* PreflightClassName(PreflightClass c);

struct PreflightResult {
  std::string check;   // "dns", "tcp", "port", "path", ...
  std::string target;  // what was checked: a name, a path, a socket
  PreflightClass result = PreflightClass::kPass;
  std::string detail;  // one line
  absl::Duration elapsed;
};

struct PreflightOptions {
  std::vector<std::string> names;           // MASTER_ADDR and the peers
  std::string rdzv_endpoint;                // HOST:PORT, "" none
  std::vector<int> ports;                   // to bind on this node
  std::vector<std::string> paths;           // read / list / stat
  std::vector<std::string> writable_paths;  // directories to write in
  std::vector<std::string> devices;         // glob patterns, e.g. /dev/nvidia*
  bool require_devices = false;
  std::string ib_root = "/sys/class/infiniband";
  bool require_ib = false;
  std::string health_daemon;                  // unix:///path, "" none
  std::vector<std::string> dns_servers;       // tests: instead of resolv.conf
  absl::Duration timeout = absl::Seconds(5);  // per check
};

// Every check `options` asks for, in the order above. `cancelled` is
// polled at least every 100 ms; once it is true the remaining checks are
// not run and the running one ends with a "stopped" detail.
std::vector<PreflightResult> RunPreflight(
    const PreflightOptions& options, const std::function<bool()>& cancelled);

// The single checks (RunPreflight runs them in this order).
std::vector<PreflightResult> CheckNames(const PreflightOptions& options,
                                        const std::function<bool()>& cancelled);
PreflightResult CheckTcpReach(const std::string& endpoint,
                              const PreflightOptions& options,
                              const std::function<bool()>& cancelled);
PreflightResult CheckFreePort(int port);
PreflightResult CheckPath(const std::string& path, bool writable,
                          absl::Duration timeout,
                          const std::function<bool()>& cancelled);
PreflightResult CheckDevices(const std::string& pattern, bool required);
std::vector<PreflightResult> CheckInfiniband(const std::string& root,
                                             bool required);
PreflightResult CheckHealthDaemon(const std::string& target,
                                  absl::Duration timeout,
                                  const std::function<bool()>& cancelled);

// The worst class of `results` (kPass for none).
PreflightClass Overall(const std::vector<PreflightResult>& results);
// "PASS  dns  master-0: 10.0.0.1 (3 ms)" per result.
std::string SummaryLine(const PreflightResult& r);
// {"result": "...", "exit_code": N, "checks": [{check, target, result,
// detail, elapsed_ms}...]}
Json PreflightJson(const std::vector<PreflightResult>& results);

}  // namespace distjob

#endif  // DISTJOB_AGENT_PREFLIGHT_H_
