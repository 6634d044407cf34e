#include "agent/status_command.h"

#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "agent/agent_loop.h"
#include "rendezvous/grpc_store_client.h"
#include "rendezvous/rdzv_config.h"
#include "rendezvous/rdzv_status.h"

namespace distjob {
namespace {

constexpr char kStatusUsage[] =
    "Usage: distjob-agent status --rdzv-endpoint HOST[:PORT] [--rdzv-id ID] "
    "[--json] [--timeout SECONDS]\n\n"
    "Prints the live rendezvous state: round, participants with ranks, node\n"
    "names and heartbeat ages, and waiting nodes. Defaults come from\n"
    "PET_RDZV_ENDPOINT and PET_RDZV_ID; without an id, every job in the\n"
    "store is shown.\n";

}  // namespace

int StatusCommand(const std::vector<std::string>& args, const EnvMap& env) {
  std::string endpoint = Lookup(env, "PET_RDZV_ENDPOINT").value_or("");
  std::string run_id = Lookup(env, "PET_RDZV_ID").value_or("");
  if (run_id == "none") run_id.clear();
  bool json = false;
  double timeout_s = 5;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i], value;
    const bool has_eq = name.find('=') != std::string::npos;
    if (has_eq) {
      value = name.substr(name.find('=') + 1);
      name = name.substr(0, name.find('='));
    }
    for (char& c : name) c = c == '_' ? '-' : c;
    auto take = [&]() -> bool {
      if (has_eq) return true;
      if (i + 1 >= args.size()) return false;
      value = args[++i];
      return true;
    };
    if (name == "-h" || name == "--help") {
      std::fputs(kStatusUsage, stdout);
      return 0;
    } else if (name == "--json") {
      json = true;
    } else if (name == "--rdzv-endpoint" && take()) {
      endpoint = value;
    } else if (name == "--rdzv-id" && take()) {
      run_id = value;
    } else if (name == "--timeout" && take() &&
               absl::SimpleAtod(value, &timeout_s) && timeout_s > 0) {
    } else {
      std::fprintf(stderr,
                   "distjob-agent status: bad argument '%s'; expected "
                   "--rdzv-endpoint HOST[:PORT], --rdzv-id ID, --json, "
                   "--timeout SECONDS\n",
                   args[i].c_str());
      return kExitBadConfig;
    }
  }
  auto ep = ParseEndpoint(endpoint);
  if (!ep.ok()) {
    std::fprintf(stderr, "distjob-agent status: %s\n",
                 std::string(ep.status().message()).c_str());
    return kExitBadConfig;
  }
  auto client =
      GrpcStoreClient::Connect(ep->ToString(), absl::Seconds(timeout_s));
  auto out = RenderRendezvousStatus(client.get(), run_id, json);
  if (!out.ok()) {
    std::fprintf(stderr, "distjob-agent status: %s\n",
                 std::string(out.status().message()).c_str());
    return absl::IsNotFound(out.status()) ? 1 : kExitRendezvousUnavailable;
  }
  std::fputs(out->c_str(), stdout);
  return 0;
}

}  // namespace distjob
