// --rdzv-conf (k1=v1,k2=v2), --rdzv-endpoint and --rdzv-backend as
// rendezvous/rdzv_config parses them; the whole input is one value.
#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/rdzv_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> notices;
  (void)distjob::ParseRdzvConf(text, &notices);
  (void)distjob::ParseRdzvConf(text);
  if (auto endpoint = distjob::ParseEndpoint(text); endpoint.ok()) {
    // What the agent prints and dials must parse back to the same place.
    auto again = distjob::ParseEndpoint(endpoint->ToString());
    if (!again.ok() || again->host != endpoint->host ||
        again->port != endpoint->port) {
      fprintf(stderr, "endpoint '%s' does not round-trip\n",
              endpoint->ToString().c_str());
      abort();
    }
  }
  (void)distjob::ParseRdzvBackend(text);
  return 0;
}
