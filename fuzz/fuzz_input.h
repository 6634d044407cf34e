// How a fuzzer's bytes become a parser's inputs: '\0' separates fields
// (argv elements, environment entries, file names and contents), since
// neither argv nor the environment can hold a NUL, so every real input is
// expressible and the seed files stay the inputs the tests use.
#ifndef DISTJOB_FUZZ_FUZZ_INPUT_H_
#define DISTJOB_FUZZ_FUZZ_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/environment.h"

namespace distjob {

// At most `max_fields` fields; the last keeps whatever follows, NULs
// included.
std::vector<std::string> SplitFields(const uint8_t* data, size_t size,
                                     size_t max_fields);

// "KEY=VALUE" fields from index `from` on; a field without '=' is a key
// whose value is empty.
EnvMap FieldsToEnv(const std::vector<std::string>& fields, size_t from);

// A fresh directory under $TMPDIR (else /dev/shm, else /tmp) for one
// fuzzer process's scratch files, removed at exit; aborts when none can
// be made.
std::string ScratchDir(const char* name);

// Replaces `path` with `content`; aborts on failure.
void WriteScratchFile(const std::string& path, const std::string& content);

// Removes every entry of `dir` (not recursively: scratch dirs are flat).
void ClearScratchDir(const std::string& dir);

}  // namespace distjob

#endif  // DISTJOB_FUZZ_FUZZ_INPUT_H_
