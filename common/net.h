// Small facts about this machine's network that several packages need: is a
// host an address or a name, what is this machine called, which port is
// free. One copy, so every caller agrees (e.g. on "[::1]").
#ifndef DISTJOB_COMMON_NET_H_
#define DISTJOB_COMMON_NET_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace distjob {

// True when `host` is a numeric IPv4 or IPv6 address; an IPv6 address may be
// bracketed as in URLs ("[::1]"). Names, even "localhost", are not.
bool IsIpLiteral(absl::string_view host);

// gethostname(): in a pod, the pod's name (or Volcano's hostname). "" when
// the kernel will not say.
std::string LocalHostname();

// What Python's socket.getfqdn() gives for `host`, which torchrun publishes
// as MASTER_ADDR: its canonical name from /etc/hosts or DNS (a pod with a
// hostname and subdomain under a headless Service:
// pod.subdomain.ns.svc.cluster.local), looked up through c-ares (the static
// binary must not use glibc's NSS). `host` itself when no name with a dot is
// found within `timeout`. `hosts_file` is read first, as NSS does.
std::string Fqdn(const std::string& host,
                 absl::Duration timeout = absl::Seconds(2),
                 const std::string& hosts_file = "/etc/hosts");

// Fqdn(LocalHostname()); "" when the kernel will not name this machine.
std::string LocalFqdn(absl::Duration timeout = absl::Seconds(2));

// A kernel-assigned free TCP port on `address` (bound, read, released).
// Errors name the address.
absl::StatusOr<int> FindFreePort(const std::string& address);

}  // namespace distjob

#endif  // DISTJOB_COMMON_NET_H_
