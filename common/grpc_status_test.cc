#include "common/grpc_status.h"

#include "gtest/gtest.h"

namespace distjob {
namespace {

TEST(GrpcStatusTest, CodesAreTheSameNumbers) {
  // The static_cast in both directions relies on this.
  EXPECT_EQ(static_cast<int>(grpc::StatusCode::UNAVAILABLE),
            static_cast<int>(absl::StatusCode::kUnavailable));
  EXPECT_EQ(static_cast<int>(grpc::StatusCode::UNAUTHENTICATED),
            static_cast<int>(absl::StatusCode::kUnauthenticated));
}

TEST(GrpcStatusTest, FromGrpcKeepsCodeAndMessage) {
  const absl::Status s = FromGrpcStatus(
      grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "too slow"));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(s.message(), "too slow");
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

TEST(GrpcStatusTest, FromGrpcWithContextPrefixesIt) {
  const absl::Status s =
      FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "refused"),
                     "store get at h:29400");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "store get at h:29400: refused");
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK, "ctx").ok());
}

TEST(GrpcStatusTest, ToGrpcKeepsCodeAndMessage) {
  const grpc::Status s = ToGrpcStatus(absl::NotFoundError("no key 'k'"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "no key 'k'");
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
}

}  // namespace
}  // namespace distjob
