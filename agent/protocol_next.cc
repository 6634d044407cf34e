// The test twin's rendezvous protocol version (agent:distjob-agent-protocol-
// next): one past the shipped one, replacing rendezvous/protocol_version.cc's
// weak definition at link time.
#include "rendezvous/protocol_version.h"

namespace distjob {

int RdzvProtocolVersion() { return kRdzvProtocolVersion + 1; }

}  // namespace distjob
