// What `distjob-agent --version` and `--licenses` print.
#ifndef DISTJOB_AGENT_VERSION_H_
#define DISTJOB_AGENT_VERSION_H_

#include <string>

namespace distjob {

// The release and commit (build_info.h), and the versions of the two
// protocols other agents and the workers speak to this one: agents of
// different rendezvous protocols refuse to share a rendezvous.
std::string VersionText();

}  // namespace distjob

#endif  // DISTJOB_AGENT_VERSION_H_
