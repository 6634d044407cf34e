// The pure parts of the TCPStore rank simulator (bench/rank_sim.cc): its
// flags, the client frames of PyTorch 2.2+'s TCPStore protocol, the
// answers it reads back, what each simulated rank sends in each pattern,
// and the latency percentiles it reports.
//
// The frames are written here from the protocol's description
// (workerstore/tcpstore_protocol.h), not with the server's own parser, so
// that a mistake there is not mirrored by the simulator that measures it.
#ifndef DISTJOB_BENCH_RANK_SIM_LIB_H_
#define DISTJOB_BENCH_RANK_SIM_LIB_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace distjob {
namespace ranksim {

enum class Pattern { kBarrier, kNccl, kAllgather };

// Which numbering the simulated clients speak: PyTorch 2.2+'s, with the
// validation handshake first, or 1.13's and 2.0's (no handshake, no
// MULTI_GET), to measure Debian's 1.13 TCPStore server with the same
// ranks.
enum class Dialect { kValidated, kLegacy };

struct SimOptions {
  std::string host = "127.0.0.1";
  int port = 0;   // required
  int ranks = 0;  // required
  Pattern pattern = Pattern::kBarrier;
  Dialect dialect = Dialect::kValidated;
  int threads = 2;
  // Connections bound to one 127.0.0.0/8 source address before the next
  // is used: the server's per-address budgets (a quarter of its
  // connections) and the ephemeral ports of one address stay clear.
  int per_source = 1000;
  // Connects in flight per thread: more overflow the listen backlog, and
  // a dropped SYN costs a one-second retransmission.
  int max_connecting = 256;
  // all-gather: the keys of one wait and multi_get.
  int batch = 512;
  // all-gather: the bytes each rank sets (its "address").
  int value_bytes = 100;
  // Every wait of the run (connects, answers, the hold) ends by then.
  absl::Duration timeout = absl::Seconds(60);
  int server_pid = 0;  // 0: no server figures
  // Every key starts with it: runs against one server keep apart (a
  // barrier counter left by the last run would release this one early).
  std::string prefix = "rank_sim/";
  // After the report, keep every connection open until stdin ends (the
  // test reads the server's stats meanwhile).
  bool hold = false;
};

// Parses argv[1..] ("--flag value" pairs); InvalidArgument naming the
// flag on anything unknown, missing or out of range.
absl::StatusOr<SimOptions> ParseFlags(const std::vector<std::string>& args);

// Client frames, appended to `out`: in kValidated, VALIDATE 0, SET 1,
// GET 3, ADD 4, WAIT 6, MULTI_GET 10; in kLegacy SET 0, GET 2, ADD 3,
// WAIT 5, no VALIDATE (nothing is appended), and a MULTI_GET becomes one
// GET a key, whose answers read as the MULTI_GET's. Integers and lengths
// are in host byte order, as TCPStore sends them.
void EncodeValidate(Dialect d, std::string* out);
void EncodeSet(Dialect d, std::string* out, absl::string_view key,
               absl::string_view value);
void EncodeGet(Dialect d, std::string* out, absl::string_view key);
void EncodeAdd(Dialect d, std::string* out, absl::string_view key,
               int64_t amount);
void EncodeWait(Dialect d, std::string* out,
                const std::vector<std::string>& keys);
void EncodeMultiGet(Dialect d, std::string* out,
                    const std::vector<std::string>& keys);

// What the answer to a rank's last request is.
struct Expect {
  enum Kind { kNone, kI64, kU8, kValues } kind = kNone;
  size_t count = 0;  // kValues: how many values
};

struct Answer {
  int64_t number = 0;  // kI64
  uint8_t byte = 0;    // kU8
  // kValues: ParseAnswer reuses the strings of the last answer parsed into
  // it, so that one Answer kept per thread parses without allocating.
  std::vector<std::string> values;
};

// Parses the answer `expect` at the start of `data`: its length, or 0
// while `data` holds only part of it.
size_t ParseAnswer(const Expect& expect, absl::string_view data, Answer* out);

// The value rank `rank` sets in the all-gather, `bytes` long.
std::string RankValue(int rank, int bytes);
// Whether `value` is RankValue(rank, bytes), without building it.
bool IsRankValue(absl::string_view value, int rank, int bytes);

// What one rank does at start, as a sequence of requests each ended by one
// it waits for the answer of.
class RankProgram {
 public:
  // Rank `rank` of o.ranks, as `o` says (pattern, dialect, batch, value
  // bytes, key prefix); `o` must outlive it.
  RankProgram(const SimOptions& o, int rank);
  // Appends the first requests to `out`; what to read next.
  Expect Start(std::string* out);
  // Checks `answer` (to the last request), appends the next requests;
  // kNone once the rank is done. An answer that is not what TCPStore
  // would give is FailedPrecondition saying what was wrong.
  absl::StatusOr<Expect> OnAnswer(const Answer& answer, std::string* out);

 private:
  Expect NextBatch(std::string* out);
  // The prefix + name, and the rank's number unless it is negative.
  std::string Key(absl::string_view name, int rank = -1) const;
  absl::Status CheckValues(const Answer& answer) const;

  const SimOptions* o_;
  int rank_;
  int step_ = 0;
  // all-gather: the first rank of the batch being fetched.
  int next_ = 0;
  std::vector<int> batch_ranks_;
};

struct Percentiles {
  double p50 = 0, p99 = 0, max = 0;
};
// Nearest-rank percentiles of `samples` (sorted in place); zeros when
// empty.
Percentiles ComputePercentiles(std::vector<double>* samples);

}  // namespace ranksim
}  // namespace distjob

#endif  // DISTJOB_BENCH_RANK_SIM_LIB_H_
