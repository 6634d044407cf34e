// The rendezvous protocol version: what the dynamic rendezvous writes in its
// store (the key schema of rdzv_keys.h and the records' encodings). Agents
// of different versions would read each other's records as malformed, late
// and with a misleading error; so the first agent of a job records its
// version under rdzv/<run_id>/protocol and every later one compares, before
// its first join, and refuses to join with an error naming both versions.
#ifndef DISTJOB_RENDEZVOUS_PROTOCOL_VERSION_H_
#define DISTJOB_RENDEZVOUS_PROTOCOL_VERSION_H_

#include <string>

#include "absl/status/status.h"
#include "rendezvous/store/store_interface.h"

namespace distjob {

// Raise it with any change an agent of the previous version would misread.
inline constexpr int kRdzvProtocolVersion = 1;

// kRdzvProtocolVersion. Weak, so that the test twin
// //agent:distjob-agent-protocol-next (testonly, never shipped) can link a
// strong definition of its own: the shipped binary has no way to change it.
int RdzvProtocolVersion();

// Records `mine` under `key` if the job has no version yet, else compares.
// A different version is FailedPrecondition naming both (and
// IsRdzvProtocolMismatch); a store error is returned as it came.
absl::Status CheckRdzvProtocol(StoreInterface* store, const std::string& key,
                               int mine);

// Whether `status` is CheckRdzvProtocol's refusal: this pod's binary does
// not match the job's, which a restart of the same pod cannot fix.
bool IsRdzvProtocolMismatch(const absl::Status& status);

}  // namespace distjob

#endif  // DISTJOB_RENDEZVOUS_PROTOCOL_VERSION_H_
