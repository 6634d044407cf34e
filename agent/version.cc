#include "agent/version.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/build_info.h"
#include "rendezvous/protocol_version.h"
#include "workerstore/tcpstore_protocol.h"

namespace distjob {

std::string VersionText() {
  // The first line keeps the form scripts match: "distjob-agent X.Y.Z".
  return absl::StrCat(
      "distjob-agent ", BuildVersion(), "\n", "commit: ", BuildCommit(), "\n",
      "rendezvous protocol: ", RdzvProtocolVersion(),
      " (store service distjob.store.v1, or etcd v3)\n",
      "workers' store protocol: PyTorch TCPStore, the numberings of PyTorch "
      "1.13 to 2.11 (VALIDATE magic ",
      absl::StrFormat("0x%08X", tcpstore::kValidateMagic), ")\n");
}

}  // namespace distjob
