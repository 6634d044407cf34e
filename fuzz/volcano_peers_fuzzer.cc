// Volcano's svc plugin input as discovery/peers reads it: host files under
// /etc/volcano (<task>.host, one host per line) and VC_<TASK>_HOSTS /
// VC_<TASK>_NUM, then who this pod is among them (discovery/identity: the
// hostname, VC_TASK_INDEX). Fields ('\0'-separated): pairs of task file
// name and file content up to an empty name, then KEY=VALUE environment
// entries (HOSTNAME is the pod's hostname). The first file is also read as
// a static --peers-file.
#include <cstdint>
#include <string>
#include <vector>

#include "discovery/identity.h"
#include "discovery/peers.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string* dir =
      new std::string(distjob::ScratchDir("volcano"));
  distjob::ClearScratchDir(*dir);
  const std::vector<std::string> fields = distjob::SplitFields(data, size, 64);
  size_t i = 0;
  std::string first_file;
  for (; i + 1 < fields.size() && !fields[i].empty(); i += 2) {
    std::string name = fields[i].substr(0, 64);
    // One flat directory: a '/' in a name would leave it.
    for (char& c : name) {
      if (c == '/') c = '_';
    }
    if (name == "." || name == "..") name = "_";
    const std::string path = *dir + "/" + name + ".host";
    distjob::WriteScratchFile(path, fields[i + 1]);
    if (first_file.empty()) first_file = path;
  }
  const distjob::EnvMap env = distjob::FieldsToEnv(fields, i + 1);

  auto cluster = distjob::ReadVolcanoPeers(*dir, env);
  if (cluster.ok()) {
    distjob::IdentityInputs in;
    if (auto host = distjob::Lookup(env, "HOSTNAME")) in.hostname = *host;
    (void)distjob::ResolveIdentity(in, env, *cluster);
  }
  if (!first_file.empty()) (void)distjob::ReadPeersFile(first_file);
  return 0;
}
