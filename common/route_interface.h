// Which of this host's network interfaces the kernel would send a packet
// to an address through: what an MPI that calls back to the launcher by
// interface (Hydra's HYDRA_IFACE) needs, so that the workers reach the
// launcher by an address rather than by a bare host name they cannot
// resolve.
#ifndef DISTJOB_COMMON_ROUTE_INTERFACE_H_
#define DISTJOB_COMMON_ROUTE_INTERFACE_H_

#include <string>

#include "absl/status/statusor.h"

namespace distjob {

// The name of the interface ("eth0", "lo") whose address the kernel picks
// as the source toward the IP literal `address`. Nothing is sent: a UDP
// socket is connected, its local address read and matched against the
// interfaces' addresses. InvalidArgument for no IP literal; NotFound
// naming `address` when no route or interface matches.
absl::StatusOr<std::string> RouteInterface(const std::string& address);

}  // namespace distjob

#endif  // DISTJOB_COMMON_ROUTE_INTERFACE_H_
