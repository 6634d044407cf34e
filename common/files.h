// Reading the small files the agent learns from (sysfs, /etc/hosts).
#ifndef DISTJOB_COMMON_FILES_H_
#define DISTJOB_COMMON_FILES_H_

#include <cstddef>
#include <string>

namespace distjob {

// The first `max_bytes` of `path`; "" when it cannot be read. open/read
// rather than iostreams: the static binary has a size limit.
std::string ReadSmallFile(const std::string& path,
                          size_t max_bytes = size_t{1} << 20);

}  // namespace distjob

#endif  // DISTJOB_COMMON_FILES_H_
