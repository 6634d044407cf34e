// Raw loopback connections for the servers' tests: a client from its own
// 127/8 address is a peer of its own, which per-address limits tell apart.
#ifndef DISTJOB_COMMON_LOOPBACK_TESTING_H_
#define DISTJOB_COMMON_LOOPBACK_TESTING_H_

namespace distjob {

// A TCP connection to 127.0.0.1:`port` from `from` (any 127/8 address):
// its socket, or -1 with a test failure naming the step that failed.
int ConnectLoopback(int port, const char* from = "127.0.0.1");

}  // namespace distjob

#endif  // DISTJOB_COMMON_LOOPBACK_TESTING_H_
