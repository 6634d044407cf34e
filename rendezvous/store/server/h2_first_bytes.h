// What the first bytes of a store connection say, read by the accept loop
// (conn_limiter) before gRPC sees them: a plaintext HTTP/2 client on a TLS
// store is answered with a refusal naming the flags, so it needs the stream
// of its first call.
#ifndef DISTJOB_RENDEZVOUS_STORE_SERVER_H2_FIRST_BYTES_H_
#define DISTJOB_RENDEZVOUS_STORE_SERVER_H2_FIRST_BYTES_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace distjob {

inline constexpr char kH2Preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
inline constexpr size_t kH2PrefaceLen = sizeof(kH2Preface) - 1;

// The stream of the first HEADERS frame after the client's preface in
// `buf` (a connection's bytes so far, from its first): 0 while none has
// arrived, -1 when the bytes are not HTTP/2.
int64_t FirstHeadersStream(const std::string& buf);

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_STORE_SERVER_H2_FIRST_BYTES_H_
