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

// OK when `host` is an IP literal (IPv6 bracketed or not) or a DNS name:
// dot-separated labels of letters, digits, '-' and '_' (1-63 bytes, not
// starting or ending with '-'), 253 bytes at most, one trailing dot allowed.
// Otherwise InvalidArgument "<what> <quoted host>: ..." saying what is
// accepted: a space, a NUL or a leading '-' reaching a resolver or a
// command line shows up much later as something else.
absl::Status CheckHostName(absl::string_view host, absl::string_view what);

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
// A host name is not resolved: the port is found free on every interface.
// Errors (a value that is no host name, a failed bind) name the address.
absl::StatusOr<int> FindFreePort(const std::string& address);

}  // namespace distjob

#endif  // DISTJOB_COMMON_NET_H_
