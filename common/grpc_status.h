// gRPC and Abseil share the canonical status codes (the same numbers), so
// the conversion keeps the code and the message; callers add the context
// (which store, which peer) to the message.
#ifndef DISTJOB_COMMON_GRPC_STATUS_H_
#define DISTJOB_COMMON_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"

namespace distjob {

absl::Status FromGrpcStatus(const grpc::Status& status);

// As above, the message prefixed with `context` ("store get at h:p: ...").
absl::Status FromGrpcStatus(const grpc::Status& status,
                            absl::string_view context);

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace distjob

#endif  // DISTJOB_COMMON_GRPC_STATUS_H_
