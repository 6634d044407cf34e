// What the store's listener answers a client that speaks the other
// transport (rendezvous/store/server/conn_limiter), and what the client
// looks for to tell that configuration error from a store that is down
// (grpc_store_client).
#ifndef DISTJOB_RENDEZVOUS_STORE_TLS_MISMATCH_H_
#define DISTJOB_RENDEZVOUS_STORE_TLS_MISMATCH_H_

namespace distjob {

// The gRPC status message a plaintext client gets from a TLS store, and
// what a TLS client's handshake error with a plaintext store contains: the
// store client maps both to a configuration error.
inline constexpr char kStoreSpeaksTls[] = "this rendezvous store speaks TLS";
inline constexpr char kStoreSpeaksPlaintext[] =
    "this rendezvous store speaks plaintext";

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_STORE_TLS_MISMATCH_H_
