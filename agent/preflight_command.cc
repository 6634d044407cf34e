#include "agent/preflight_command.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/cli/flag_parser.h"
#include "agent/cli/subcommand_flags.h"
#include "agent/exit_codes.h"
#include "agent/preflight.h"
#include "common/duration.h"
#include "common/json.h"
#include "discovery/peers.h"

namespace distjob {
namespace {

constexpr char kUsage[] =
    "Usage: distjob-agent preflight [options] [--json]\n\n"
    "Checks what this pod will need before it joins the job: MASTER_ADDR's "
    "and the peers' DNS, TCP reach of the rendezvous endpoint, free ports, "
    "paths, accelerator device files, InfiniBand port states and a node "
    "health daemon. Each check is bounded by --timeout; SIGTERM or SIGINT "
    "ends the run within a second. Exits with Kubeflow KEP-3416's codes: 0 "
    "pass, 10 warning, 20 retryable, 30 fatal (2: bad flags).";

FlagSetter Append(std::vector<std::string>* out) {
  return [out](absl::string_view v, absl::string_view) {
    out->emplace_back(v);
    return absl::OkStatus();
  };
}

struct CommandLine {
  PreflightOptions checks;
  std::string master_addr, peers, peers_file;
  std::string volcano_dir = "/etc/volcano";
  bool json = false;
};

void AddFlag(FlagSet* flags, std::vector<std::string> names,
             const char* metavar, const char* help, FlagSetter set,
             std::vector<std::string> env = {}, bool is_bool = false) {
  Flag f;
  f.names = std::move(names);
  f.metavar = metavar;
  f.help = help;
  f.set = std::move(set);
  f.env = std::move(env);
  f.is_bool = is_bool;
  flags->Add(std::move(f));
}

// Where the names and the endpoint to check come from.
void AddSourceFlags(FlagSet* flags, CommandLine* cl) {
  PreflightOptions* o = &cl->checks;
  AddFlag(flags, {"master-addr"}, "HOST", "Resolve this name.",
          SetString(&cl->master_addr), {"MASTER_ADDR", "PET_MASTER_ADDR"});
  AddFlag(flags, {"peers"}, "TASK=H1,H2;...",
          "Resolve these peers (else --peers-file; else the Volcano host files "
          "and VC_* variables).",
          SetString(&cl->peers), {"DISTJOB_PEERS"});
  AddFlag(flags, {"peers-file"}, "PATH", "A hostfile of peers.",
          SetString(&cl->peers_file), {"DISTJOB_PEERS_FILE"});
  AddFlag(flags, {"volcano-dir"}, "DIR",
          "Volcano's host files (default /etc/volcano).",
          SetString(&cl->volcano_dir), {"DISTJOB_VOLCANO_DIR"});
  AddFlag(flags, {"rdzv-endpoint"}, "HOST:PORT",
          "Connect to this endpoint over TCP.", SetString(&o->rdzv_endpoint),
          {"PET_RDZV_ENDPOINT"});
  AddFlag(flags, {"dns-server"}, "IP[:PORT]",
          "Ask this DNS server instead of /etc/resolv.conf (repeatable).",
          Append(&o->dns_servers));
}

// What to check on this node, and how.
void AddCheckFlags(FlagSet* flags, CommandLine* cl) {
  PreflightOptions* o = &cl->checks;
  AddFlag(flags, {"port"}, "N",
          "A port this node must be able to bind (repeatable).",
          [o](absl::string_view v, absl::string_view source) {
            int port = 0;
            auto status = SetInt(&port, 1, 65535)(v, source);
            if (status.ok()) o->ports.push_back(port);
            return status;
          });
  AddFlag(flags, {"check-path"}, "PATH",
          "Stat, then list (a directory) or read 4 KiB of (a file) PATH "
          "(repeatable).",
          Append(&o->paths));
  AddFlag(flags, {"check-writable"}, "DIR",
          "Create and remove a file in DIR (repeatable).",
          Append(&o->writable_paths));
  AddFlag(flags, {"device"}, "GLOB",
          "Accelerator device files that must exist, e.g. '/dev/nvidia[0-9]*' "
          "(repeatable).",
          Append(&o->devices));
  AddFlag(flags, {"require-devices"}, "",
          "A missing --device is retryable (20), not a warning (10).",
          SetBool(&o->require_devices), {}, true);
  AddFlag(flags, {"ib-sysfs-root"}, "DIR",
          "Where InfiniBand ports' state files are (default "
          "/sys/class/infiniband).",
          SetString(&o->ib_root));
  AddFlag(flags, {"require-ib"}, "",
          "No InfiniBand port, or one not ACTIVE, is retryable (20), not a "
          "warning (10).",
          SetBool(&o->require_ib), {}, true);
  AddFlag(flags, {"health-daemon"}, "unix:///PATH",
          "Call nvhcd.HealthCheckService/RunHealthCheck on this Unix socket; "
          "healthy when its output says {\"fail_count\":0}.",
          [o](absl::string_view v, absl::string_view) {
            if (!absl::StartsWith(v, "unix:") || v.size() <= 5) {
              return absl::InvalidArgumentError(absl::StrCat(
                  "'", v, "' is not unix:///PATH (a Unix socket)"));
            }
            o->health_daemon = std::string(v);
            return absl::OkStatus();
          });
  AddFlag(flags, {"timeout"}, "SECONDS", "Bound on each check (default 5).",
          [o](absl::string_view v, absl::string_view) {
            auto d = ParseDuration(v, "value");
            if (!d.ok()) return d.status();
            if (*d <= absl::ZeroDuration()) {
              return absl::InvalidArgumentError(absl::StrCat(
                  "'", v, "' is not a positive number of seconds"));
            }
            o->timeout = *d;
            return absl::OkStatus();
          });
  AddFlag(flags, {"json"}, "",
          "Print one JSON document instead of one line per check.",
          SetBool(&cl->json), {}, true);
}

// The first stop signal pending (blocked since the start), or 0.
int PendingStop() {
  sigset_t pending;
  sigpending(&pending);
  if (sigismember(&pending, SIGTERM) == 1) return SIGTERM;
  if (sigismember(&pending, SIGINT) == 1) return SIGINT;
  return 0;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> PreflightNames(
    const std::string& master_addr, const std::string& peers_spec,
    const std::string& peers_file, const std::string& volcano_dir,
    const EnvMap& env) {
  absl::StatusOr<Cluster> cluster =
      !peers_spec.empty()   ? ParseStaticPeers(peers_spec, "--peers")
      : !peers_file.empty() ? ReadPeersFile(peers_file)
                            : ReadVolcanoPeers(volcano_dir, env);
  if (!cluster.ok()) return cluster.status();
  std::vector<std::string> names;
  if (!master_addr.empty()) names.push_back(master_addr);
  for (const TaskPeers& task : cluster->tasks) {
    for (const std::string& host : task.hosts) {
      if (std::find(names.begin(), names.end(), host) == names.end()) {
        names.push_back(host);
      }
    }
  }
  return names;
}

int PreflightCommand(const std::vector<std::string>& args, const EnvMap& env) {
  CommandLine cl;
  FlagSet flags(kUsage);
  AddSourceFlags(&flags, &cl);
  AddCheckFlags(&flags, &cl);
  std::vector<std::string> positional;
  if (auto done =
          ParseSubcommandFlags("preflight", flags, args, env, 0, &positional)) {
    return *done;
  }
  // Before any thread exists, so every thread inherits the mask: a stop
  // signal then waits, pending, for the checks to see it.
  sigset_t stops;
  sigemptyset(&stops);
  sigaddset(&stops, SIGTERM);
  sigaddset(&stops, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stops, nullptr);
  auto names = PreflightNames(cl.master_addr, cl.peers, cl.peers_file,
                              cl.volcano_dir, env);
  if (!names.ok()) {
    std::fprintf(stderr, "distjob-agent preflight: %s\n",
                 std::string(names.status().message()).c_str());
    return kExitBadConfig;
  }
  cl.checks.names = *std::move(names);
  const auto results =
      RunPreflight(cl.checks, [] { return PendingStop() != 0; });
  if (cl.json) {
    std::printf("%s\n", DumpJson(PreflightJson(results)).c_str());
  } else {
    for (const PreflightResult& r : results) {
      std::printf("%s\n", SummaryLine(r).c_str());
    }
  }
  if (const int sig = PendingStop(); sig != 0) {
    std::fprintf(stderr, "distjob-agent preflight: stopped by signal %d\n",
                 sig);
    return ExitCodeForSignal(sig);
  }
  const PreflightClass overall = Overall(results);
  if (!cl.json) {
    std::printf("preflight: %s (exit %d)\n", PreflightClassName(overall),
                static_cast<int>(overall));
  }
  return static_cast<int>(overall);
}

}  // namespace distjob
