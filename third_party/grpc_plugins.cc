// The gRPC plugins the agent's channels and servers use, registered in
// place of gRPC's own list.
//
// gRPC 1.51 builds its configuration on first use by calling
// grpc_core::BuildCoreConfiguration, defined in libgrpc.a's
// grpc_plugin_registry.cc.o. Defining it here (this library is alwayslink,
// so its object precedes -lgrpc on every link line) keeps that archive
// member out of the link, and with it every plugin only it names: the xDS
// resolver, LB policies and filters, RLS, grpclb, the ring-hash, priority,
// weighted-target and outlier-detection policies, fault injection, the fake
// resolver, and through them re2 and the cloud credential types. That is
// ~2.4 MB of the static binary (README, "Binary size").
//
// The agent needs none of them: every channel's target is an ipv4:/ipv6:
// address from common/resolver with no service config, so it uses the
// sockaddr resolver and pick_first. What gRPC does for such a channel or
// server is unchanged: the calls below are gRPC's own, in gRPC's order (the
// handshakers' order matters), minus the plugins above. The DNS resolvers
// and the HTTP proxy mapper stay, so a dns: target or an https_proxy
// variable behaves as with the full list. Removing GRPC_NO_XDS's list
// (RegisterExtraFilters) is a configuration gRPC supports; the rest are
// plugins a channel only reaches through a service config naming them.
//
// The functions are gRPC internals with no installed header: they are
// declared here by their (stable across 1.5x) signatures, and a link with
// both definitions would fail on the duplicate symbol rather than pick one.
// A gRPC upgrade must compare this list with the new
// src/core/plugin_registry/grpc_plugin_registry.cc.

#include <grpcpp/version_info.h>

// The list below is 1.51's; another version may name other plugins and
// still link (the archive member with gRPC's own list is then never
// pulled in), so a gRPC upgrade must fail here until the list is compared.
static_assert(GRPC_CPP_VERSION_MAJOR == 1 && GRPC_CPP_VERSION_MINOR == 51,
              "third_party/grpc_plugins.cc lists gRPC 1.51's plugins: compare "
              "it with the new grpc_plugin_registry.cc");

namespace grpc_core {

// Only ever handled by pointer here; gRPC's own definition is the real one.
class CoreConfiguration {
 public:
  class Builder;
};

void RegisterHttpConnectHandshaker(CoreConfiguration::Builder* builder);
void RegisterTCPConnectHandshaker(CoreConfiguration::Builder* builder);
void RegisterPickFirstLbPolicy(CoreConfiguration::Builder* builder);
void BuildClientChannelConfiguration(CoreConfiguration::Builder* builder);
void SecurityRegisterHandshakerFactories(CoreConfiguration::Builder* builder);
void RegisterClientAuthorityFilter(CoreConfiguration::Builder* builder);
void RegisterChannelIdleFilters(CoreConfiguration::Builder* builder);
void RegisterHttpFilters(CoreConfiguration::Builder* builder);
void RegisterDeadlineFilter(CoreConfiguration::Builder* builder);
void RegisterMessageSizeFilter(CoreConfiguration::Builder* builder);
void RegisterServiceConfigChannelArgFilter(CoreConfiguration::Builder* builder);
void RegisterResourceQuota(CoreConfiguration::Builder* builder);
void RegisterAresDnsResolver(CoreConfiguration::Builder* builder);
void RegisterNativeDnsResolver(CoreConfiguration::Builder* builder);
void RegisterSockaddrResolver(CoreConfiguration::Builder* builder);
void RegisterHttpProxyMapper(CoreConfiguration::Builder* builder);
void RegisterSecurityFilters(CoreConfiguration::Builder* builder);
void RegisterBuiltins(CoreConfiguration::Builder* builder);

void BuildCoreConfiguration(CoreConfiguration::Builder* builder);

}  // namespace grpc_core

namespace grpc_event_engine {
namespace experimental {
void RegisterEventEngineChannelArgPreconditioning(
    grpc_core::CoreConfiguration::Builder* builder);
}  // namespace experimental
}  // namespace grpc_event_engine

namespace grpc_core {

void BuildCoreConfiguration(CoreConfiguration::Builder* builder) {
  grpc_event_engine::experimental::RegisterEventEngineChannelArgPreconditioning(
      builder);
  // As gRPC's: the TCP connect handshaker registered last goes first.
  RegisterHttpConnectHandshaker(builder);
  RegisterTCPConnectHandshaker(builder);
  RegisterPickFirstLbPolicy(builder);
  BuildClientChannelConfiguration(builder);
  SecurityRegisterHandshakerFactories(builder);
  RegisterClientAuthorityFilter(builder);
  RegisterChannelIdleFilters(builder);
  RegisterHttpFilters(builder);
  RegisterDeadlineFilter(builder);
  RegisterMessageSizeFilter(builder);
  RegisterServiceConfigChannelArgFilter(builder);
  RegisterResourceQuota(builder);
  RegisterAresDnsResolver(builder);
  RegisterNativeDnsResolver(builder);
  RegisterSockaddrResolver(builder);
  RegisterHttpProxyMapper(builder);
  RegisterSecurityFilters(builder);
  RegisterBuiltins(builder);
}

}  // namespace grpc_core
