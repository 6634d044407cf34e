// THIRD_PARTY_NOTICES, embedded at build time (agent:notices_text, from the
// file tools/notices.py generates): the static binary carries the licences
// of what it links, whatever image it is copied into.
#ifndef DISTJOB_AGENT_LICENSES_H_
#define DISTJOB_AGENT_LICENSES_H_

#include "absl/strings/string_view.h"

namespace distjob {

absl::string_view ThirdPartyNotices();

}  // namespace distjob

#endif  // DISTJOB_AGENT_LICENSES_H_
