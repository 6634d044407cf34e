#include "rendezvous/protocol_version.h"

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace distjob {
namespace {

// The payload that marks CheckRdzvProtocol's refusal: a FailedPrecondition
// from the store itself (a closed etcd client) is not one.
constexpr absl::string_view kMismatchType =
    "type.distjob.dev/rdzv-protocol-mismatch";

}  // namespace

__attribute__((weak)) int RdzvProtocolVersion() { return kRdzvProtocolVersion; }

absl::Status CheckRdzvProtocol(StoreInterface* store, const std::string& key,
                               int mine) {
  const std::string value = absl::StrCat(mine);
  auto r = store->CompareSet(key, /*expected=*/"", value);
  if (!r.ok()) return r.status();
  if (r->swapped || r->value == value) return absl::OkStatus();
  int theirs = 0;
  const std::string shown =
      absl::SimpleAtoi(r->value, &theirs)
          ? absl::StrCat(theirs)
          // Whatever wrote it, one short line: the record is not ours.
          : absl::StrCat("'", absl::CHexEscape(r->value.substr(0, 32)), "'");
  absl::Status s = absl::FailedPreconditionError(absl::StrCat(
      "the rendezvous at ", key, " speaks rendezvous protocol version ", shown,
      "; this agent speaks version ", mine,
      ": agents of different versions cannot share a rendezvous (run the "
      "same distjob-agent release on every node, or use another --rdzv-id)"));
  s.SetPayload(kMismatchType, absl::Cord(shown));
  return s;
}

bool IsRdzvProtocolMismatch(const absl::Status& status) {
  return status.GetPayload(kMismatchType).has_value();
}

}  // namespace distjob
