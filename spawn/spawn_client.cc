#include "spawn/spawn_client.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "proto/spawn.grpc.pb.h"

namespace distjob {
namespace {

// An EndJob reply is empty: anything larger is not a spawn server.
constexpr int kMaxEndJobReplyBytes = 1024;
// Calls (connections) in flight at once: the launcher's descriptors are
// bounded whatever the number of workers.
constexpr size_t kMaxEndJobCalls = 256;

// One EndJob call in flight; its address is the completion queue's tag.
struct EndJobCall {
  std::unique_ptr<spawn::Spawner::Stub> stub;
  grpc::ClientContext ctx;
  spawn::EndJobReply reply;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<spawn::EndJobReply>> rpc;
};

}  // namespace

std::shared_ptr<grpc::Channel> MakeSpawnChannel(const GrpcTarget& target,
                                                const StoreSecurity& security,
                                                int max_reply_bytes) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(max_reply_bytes);
  args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, target.authority);
  if (security.tls() && security.server_name.empty()) {
    args.SetSslTargetNameOverride(target.host);
  }
  auto credentials = MakeChannelCredentials(security, &args);
  return grpc::CreateCustomChannel(target.target, credentials, args);
}

void AddSpawnToken(grpc::ClientContext* ctx, const StoreSecurity& security) {
  if (security.token.empty()) return;
  ctx->AddMetadata(kTokenMetadataKey,
                   absl::StrCat(kTokenPrefix, security.token));
}

std::vector<EndJobAnswer> EndJobOnHosts(const std::vector<std::string>& hosts,
                                        int port, const StoreSecurity& security,
                                        int exit_code,
                                        const std::string& reason,
                                        absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<EndJobAnswer> answers(hosts.size());
  for (size_t i = 0; i < hosts.size(); ++i) answers[i].host = hosts[i];
  // Every name at once, in half the time: one slow name must not leave
  // the others no time for their calls.
  ResolverOptions resolver;
  resolver.pass_timeout = timeout / 2;
  resolver.query_timeout = std::min(resolver.query_timeout, timeout / 2);
  auto addresses = ResolveNames(hosts, resolver);
  spawn::EndJobRequest request;
  request.set_exit_code(exit_code);
  request.set_reason(reason);
  for (size_t first = 0; first < hosts.size(); first += kMaxEndJobCalls) {
    const size_t last = std::min(hosts.size(), first + kMaxEndJobCalls);
    grpc::CompletionQueue cq;
    std::vector<std::unique_ptr<EndJobCall>> calls(last - first);
    size_t pending = 0;
    for (size_t i = first; i < last; ++i) {
      absl::StatusOr<GrpcTarget> target =
          addresses.ok() ? GrpcTargetFor(hosts[i], port, (*addresses)[hosts[i]])
                         : absl::StatusOr<GrpcTarget>(addresses.status());
      if (!target.ok()) {
        answers[i].error = std::string(target.status().message());
        continue;
      }
      auto call = std::make_unique<EndJobCall>();
      call->stub = spawn::Spawner::NewStub(
          MakeSpawnChannel(*target, security, kMaxEndJobReplyBytes));
      call->ctx.set_deadline(absl::ToChronoTime(deadline));
      AddSpawnToken(&call->ctx, security);
      call->rpc = call->stub->AsyncEndJob(&call->ctx, request, &cq);
      call->rpc->Finish(&call->reply, &call->status,
                        reinterpret_cast<void*>(static_cast<uintptr_t>(i)));
      calls[i - first] = std::move(call);
      ++pending;
    }
    // Every call has the deadline, so each completes by then.
    void* tag = nullptr;
    bool ok = false;
    while (pending > 0 && cq.Next(&tag, &ok)) {
      const size_t i = static_cast<size_t>(reinterpret_cast<uintptr_t>(tag));
      if (!calls[i - first]->status.ok()) {
        answers[i].error = calls[i - first]->status.error_message();
      }
      --pending;
    }
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
  }
  return answers;
}

}  // namespace distjob
