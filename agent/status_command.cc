#include "agent/status_command.h"

#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "agent/cli/flag_parser.h"
#include "agent/cli/security_flags.h"
#include "agent/cli/subcommand_flags.h"
#include "agent/exit_codes.h"
#include "common/duration.h"
#include "common/json.h"
#include "common/text.h"
#include "rendezvous/rdzv_config.h"
#include "rendezvous/rdzv_status.h"
#include "rendezvous/store/etcd/options.h"
#include "rendezvous/store/etcd/store.h"
#include "rendezvous/store/grpc_store_client.h"

namespace distjob {
namespace {

constexpr char kStatusUsage[] =
    "Usage: distjob-agent status --rdzv-endpoint HOST[:PORT] [--rdzv-id ID] "
    "[--rdzv-backend c10d|etcd] [--json]\n\n"
    "Prints the live rendezvous state: round, participants with ranks, node\n"
    "names and heartbeat ages, and waiting nodes. Without an id, every job\n"
    "in the embedded store is shown (etcd needs the id: keys live under\n"
    "it).";

struct StatusOptions {
  std::string backend = "c10d";
  std::string endpoint;
  std::string run_id;
  std::string conf;
  bool json = false;
  absl::Duration timeout = absl::Seconds(5);
  StoreSecurityOptions security;
};

FlagSet StatusFlags(StatusOptions* o) {
  FlagSet flags(kStatusUsage);
  auto string_flag = [&flags](const char* name, const char* env,
                              const char* metavar, const char* help,
                              std::string* out) {
    Flag f;
    f.names = {name};
    f.env = {env};
    f.metavar = metavar;
    f.help = help;
    f.set = [out](absl::string_view v, absl::string_view) {
      *out = std::string(v);
      return absl::OkStatus();
    };
    flags.Add(std::move(f));
  };
  string_flag("rdzv-endpoint", "PET_RDZV_ENDPOINT", "HOST[:PORT][,...]",
              "The rendezvous store (etcd: its endpoints).", &o->endpoint);
  string_flag("rdzv-id", "PET_RDZV_ID", "ID", "The job's run id.", &o->run_id);
  string_flag("rdzv-backend", "PET_RDZV_BACKEND", "c10d|etcd|etcd-v3",
              "The store's kind (default c10d).", &o->backend);
  string_flag("rdzv-conf", "PET_RDZV_CONF", "K=V[,K=V...]",
              "etcd: etcd_prefix, ca_cert, cert, key.", &o->conf);
  Flag json;
  json.names = {"json"};
  json.is_bool = true;
  json.help = "Print one JSON object.";
  json.set = [o](absl::string_view v, absl::string_view) {
    o->json = v != "0";
    return absl::OkStatus();
  };
  flags.Add(std::move(json));
  Flag timeout;
  timeout.names = {"timeout"};
  timeout.metavar = "SECONDS";
  timeout.help = "How long to try reaching the store (default 5).";
  timeout.set = [o](absl::string_view v, absl::string_view) {
    auto d = ParseDuration(v, "value");
    if (!d.ok()) return d.status();
    o->timeout = *d;
    return absl::OkStatus();
  };
  flags.Add(std::move(timeout));
  // The same token and TLS files as the job's agents (a protected store
  // answers nothing else).
  AddSecurityFlags(&flags, &o->security);
  return flags;
}

absl::StatusOr<std::unique_ptr<StoreInterface>> ConnectStore(
    const StatusOptions& o, const EnvMap& env) {
  if (o.backend == "etcd" || o.backend == "etcd-v3") {
    if (o.run_id.empty() || o.run_id == "none") {
      return absl::InvalidArgumentError(
          "--rdzv-id is required with --rdzv-backend etcd: the job's keys "
          "live under its run id");
    }
    auto options = ParseEtcdOptions(o.endpoint, o.conf, o.run_id);
    if (!options.ok()) return options.status();
    options->rpc_timeout = o.timeout;
    auto store = EtcdStore::Connect(*std::move(options));
    if (!store.ok()) return store.status();
    if (absl::Status s = (*store)->WaitUntilReachable(o.timeout); !s.ok()) {
      return s;
    }
    return std::unique_ptr<StoreInterface>(*std::move(store));
  }
  if (o.backend != "c10d") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rdzv-backend '", o.backend, "' is not one of c10d, etcd, etcd-v3"));
  }
  auto ep = ParseEndpoint(o.endpoint);
  if (!ep.ok()) return ep.status();
  auto security = LoadSecurity(o.security, env);
  if (!security.ok()) return security.status();
  return std::unique_ptr<StoreInterface>(
      GrpcStoreClient::Connect(ep->ToString(), o.timeout, *security));
}

// The error line on stderr and, with --json, the same as a JSON object on
// stdout: a script reading the output always gets JSON.
int Fail(const StatusOptions& o, const absl::Status& status, int code) {
  const std::string message = OneLine(status.message());
  std::fprintf(stderr, "distjob-agent status: %s\n", message.c_str());
  if (o.json) {
    Json error = {{"error", message}, {"exit_code", code}};
    std::fputs((DumpJson(error, -1, /*ascii=*/true) + "\n").c_str(), stdout);
  }
  return code;
}

}  // namespace

int StatusCommand(const std::vector<std::string>& args, const EnvMap& env) {
  StatusOptions options;
  FlagSet flags = StatusFlags(&options);
  std::vector<std::string> positional;
  if (auto done =
          ParseSubcommandFlags("status", flags, args, env, 0, &positional)) {
    return *done;
  }
  if (options.run_id == "none") options.run_id.clear();
  auto store = ConnectStore(options, env);
  if (!store.ok()) {
    return Fail(options, store.status(), ExitCodeFor(store.status()));
  }
  auto out = RenderRendezvousStatus(store->get(), options.run_id, options.json);
  if (!out.ok()) {
    const absl::Status& s = out.status();
    if (absl::IsNotFound(s)) return Fail(options, s, kExitCheckFailed);
    // A refused token is this pod's configuration, as in `run`.
    if (absl::IsUnauthenticated(s)) return Fail(options, s, kExitBadConfig);
    return Fail(options, s, kExitRendezvousUnavailable);
  }
  std::fputs(out->c_str(), stdout);
  return 0;
}

}  // namespace distjob
