// StoreInterface over the embedded store's gRPC protocol. Every call waits
// until its deadline for the host's name to resolve (the agent's resolver,
// common/resolver: gRPC is handed addresses) and for the channel to be
// ready (gRPC reconnects with backoff), so "the host is not up yet" and
// "the name does not resolve yet" both just wait.
#ifndef DISTJOB_RENDEZVOUS_STORE_GRPC_STORE_CLIENT_H_
#define DISTJOB_RENDEZVOUS_STORE_GRPC_STORE_CLIENT_H_

#include <memory>
#include <string>

#include "rendezvous/store/store_credentials.h"
#include "rendezvous/store/store_interface.h"

namespace distjob {

class GrpcStoreClient : public StoreInterface {
 public:
  // `endpoint` is HOST:PORT ([V6]:PORT); `rpc_timeout` bounds each call
  // beyond its own blocking time (torchrun's read_timeout). `security`'s
  // token goes with every call and its TLS settings make the channel; a
  // call the store refuses for its token is Unauthenticated, at once.
  // gRPC shares one connection among channels to the same address with the
  // same arguments; with `own_connection`, this client has a connection of
  // its own, as a client in another process would (tests and the scale
  // benchmark, which run many clients in one process). Without
  // `poll_for_answers` a call sleeps until its answer at once (see the .cc's
  // Impl::Call): for the scale benchmark, whose thousands of simulated
  // nodes share a client and the store's 2 cores, where a node polling for
  // its answer would take the CPU the others and the store need.
  static std::unique_ptr<GrpcStoreClient> Connect(
      const std::string& endpoint, absl::Duration rpc_timeout,
      const StoreSecurity& security = {}, bool own_connection = false,
      bool poll_for_answers = true);
  ~GrpcStoreClient() override;

  // Waits until the store answers, for at most `timeout`.
  absl::Status WaitUntilReachable(absl::Duration timeout);

  [[nodiscard]] absl::StatusOr<int64_t> MultiSet(
      const std::vector<std::pair<std::string, std::string>>& kvs,
      absl::Duration ttl) override;
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> MultiGet(
      const std::vector<std::string>& keys, absl::Duration timeout) override;
  [[nodiscard]] absl::StatusOr<int64_t> Add(const std::string& key,
                                            int64_t delta) override;
  [[nodiscard]] absl::StatusOr<AddRecordResult> AddThenRecord(
      const std::string& key, int64_t delta, const std::string& record_prefix,
      const std::string& record) override;
  [[nodiscard]] absl::StatusOr<AddRecordResult> LeaseThenAddRecord(
      const std::vector<std::pair<std::string, std::string>>& lease,
      absl::Duration ttl, const std::string& key, int64_t delta,
      const std::string& record_prefix, const std::string& record) override;
  [[nodiscard]] absl::StatusOr<AddRecordListing> AddRecordThenList(
      const std::vector<std::pair<std::string, std::string>>& lease,
      absl::Duration ttl, const std::string& key, int64_t delta,
      const std::string& record_prefix, const std::string& record,
      const std::string& list_prefix) override;
  [[nodiscard]] absl::StatusOr<CompareSetResult> CompareSet(
      const std::string& key, const std::string& expected,
      const std::string& desired) override;
  [[nodiscard]] absl::StatusOr<int64_t> Append(
      const std::string& key, const std::string& value) override;
  [[nodiscard]] absl::StatusOr<bool> Check(
      const std::vector<std::string>& keys) override;
  [[nodiscard]] absl::StatusOr<int64_t> Delete(
      const std::vector<std::string>& keys) override;
  [[nodiscard]] absl::StatusOr<int64_t> NumKeys() override;
  [[nodiscard]] absl::StatusOr<StoreListing> ListPage(
      const std::string& prefix, const std::string& start_after,
      size_t limit) override;
  void Close() override;
  [[nodiscard]] absl::StatusOr<WatchResult> WatchAny(
      const std::vector<std::string>& prefixes, int64_t after_revision,
      absl::Duration timeout) override;

 private:
  struct Impl;
  explicit GrpcStoreClient(std::unique_ptr<Impl> impl);
  // One Add request; `lease` empty: none; `list_prefix` empty: no listing.
  absl::StatusOr<AddRecordListing> AddRequest(
      const std::vector<std::pair<std::string, std::string>>& lease,
      absl::Duration ttl, const std::string& key, int64_t delta,
      const std::string& record_prefix, const std::string& record,
      const std::string& list_prefix);
  std::unique_ptr<Impl> impl_;
};

// The addresses of a gRPC target ("ipv4:10.0.0.1:29400,10.0.0.2:29400"),
// without the scheme: "10.0.0.1:29400, 10.0.0.2:29400".
std::string TargetAddresses(absl::string_view target);

// Why a first connection to `addrs` failed, from gRPC's message: "connection
// refused by 10.0.0.1:29400" (the address gRPC names, else `addrs`), or
// "cannot connect to ADDRS (gRPC's message)".
std::string ConnectFailure(absl::string_view grpc_message,
                           absl::string_view addrs);

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_STORE_GRPC_STORE_CLIENT_H_
