// The spawn server's handling of one call (spawn/spawn_call): what a caller
// sends after the token check, as bytes. The input is a small header, then
// frames of [2-byte big-endian length][bytes], each parsed as a
// SpawnRequest by protobuf as gRPC would (a frame over the message limit,
// or one that does not parse, breaks the stream as gRPC's limit and
// decoder do). The command runs nothing (spawn/fake_command): no fork, so
// thousands of calls a second, and the same replies for the same bytes.
//
// Header: [flags][exit][chunk][writes][stdout len x2][stderr len x2]
//   flags bit 0: the caller behaves as `rsh` does (its stdin's end, then a
//     SIGKILL as a user's ^C would send, then waits for the exit status);
//     else it hangs up after its frames;
//   bit 1: the command reads its stdin (else writes to it fail, EPIPE);
//   bits 2-3: it ends at once, on its stdin's close, or on a signal;
//   bit 4: it ends by signal `exit` rather than with status `exit`;
//   chunk: output read per reply is 1 << (chunk % 16) bytes;
//   writes: replies the stream takes before it breaks (0: no limit).
//
// Checked: a first message that is no command runs nothing; every reply
// holds one non-empty chunk within the limit or the exit, nothing follows
// the exit; the output replied is the command's, in order (all of it when
// the exit is sent); the stdin it got is what was sent before the first
// close, in order (all of it when the caller waited for the end); every
// signal number in range reached it; the command was ended every time.
#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "google/protobuf/stubs/logging.h"
#include "proto/spawn.grpc.pb.h"
#include "spawn/fake_command.h"
#include "spawn/spawn_call.h"

namespace distjob {
namespace {

using spawn::SpawnReply;
using spawn::SpawnRequest;

// Small, so that inputs within libFuzzer's -max_len reach them.
constexpr size_t kMaxMessageBytes = 2048;
// The fake's stdin pipe must never fill (the pump would wait for room
// that nothing makes): far below a pipe's 64 KiB.
constexpr size_t kMaxStdinBytes = 16 * 1024;
constexpr size_t kMaxOutputBytes = 24 * 1024;

#define FUZZ_CHECK(cond)                                      \
  do {                                                        \
    if (!(cond)) {                                            \
      std::fprintf(stderr, "spawn_call_fuzzer: %s\n", #cond); \
      std::abort();                                           \
    }                                                         \
  } while (0)

// The caller's side of the call: its messages, then (as `rsh` does) a wait
// for the exit status, or an early hang-up.
class FakeStream final : public SpawnStream {
 public:
  FakeStream(std::vector<std::string> frames, bool waits, int write_budget,
             size_t chunk)
      : frames_(std::move(frames)),
        waits_(waits),
        write_budget_(write_budget),
        chunk_(chunk) {}

  void SendInitialMetadata() override {}
  bool NextMessageSize(uint32_t* sz) override {
    *sz = kMaxMessageBytes;
    return true;
  }

  bool Read(SpawnRequest* msg) override {
    if (Broken()) return false;
    if (next_ < frames_.size()) {
      const std::string& f = frames_[next_++];
      // gRPC's receive limit and its decoder: the stream breaks.
      if (f.size() > kMaxMessageBytes || !msg->ParseFromString(f)) {
        Break();
        return false;
      }
      return true;
    }
    if (!waits_) return false;
    if (tail_next_ < tail_.size()) {
      *msg = tail_[tail_next_++];
      return true;
    }
    // Waits, as rsh does, until told the end or cut off.
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](FakeStream* s) {
          return s->exit_sent_ || s->cancelled_ || s->broken_;
        },
        this));
    return false;
  }

  bool Write(const SpawnReply& msg, grpc::WriteOptions) override {
    absl::MutexLock lock(&mu_);
    if (broken_) return false;
    if (write_budget_ > 0 && writes_ >= write_budget_) {
      broken_ = true;  // a failed write is a dead call: reads end too
      return false;
    }
    ++writes_;
    FUZZ_CHECK(!exit_sent_);  // nothing follows the exit
    FUZZ_CHECK(msg.kind_case() != SpawnReply::KIND_NOT_SET);
    switch (msg.kind_case()) {
      case SpawnReply::kStdoutData:
        FUZZ_CHECK(!msg.stdout_data().empty());
        FUZZ_CHECK(msg.stdout_data().size() <= chunk_);
        out_ += msg.stdout_data();
        break;
      case SpawnReply::kStderrData:
        FUZZ_CHECK(!msg.stderr_data().empty());
        FUZZ_CHECK(msg.stderr_data().size() <= chunk_);
        err_ += msg.stderr_data();
        break;
      case SpawnReply::kExitStatus:
      case SpawnReply::kExitSignal:
        exit_sent_ = true;
        exit_ = msg;
        break;
      default:
        break;
    }
    return true;
  }

  void Cancel() {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
  }

  // The rsh-like caller's tail: its stdin's end, then ^C.
  void AddTail() {
    SpawnRequest close;
    close.set_stdin_close(true);
    SpawnRequest kill;
    kill.set_signal(SIGKILL);
    tail_ = {close, kill};
  }

  bool Broken() {
    absl::MutexLock lock(&mu_);
    return broken_;
  }

  absl::Mutex mu_;
  std::string out_, err_;
  bool exit_sent_ = false;
  SpawnReply exit_;

 private:
  void Break() {
    absl::MutexLock lock(&mu_);
    broken_ = true;
  }

  const std::vector<std::string> frames_;
  std::vector<SpawnRequest> tail_;
  size_t next_ = 0, tail_next_ = 0;
  const bool waits_;
  const int write_budget_;
  const size_t chunk_;
  int writes_ = 0;
  bool cancelled_ = false;
  bool broken_ = false;
};

class FakeContext final : public SpawnCallContext {
 public:
  explicit FakeContext(FakeStream* stream) : stream_(stream) {}
  bool IsCancelled() const override {
    absl::MutexLock lock(&mu_);
    return cancelled_;
  }
  void TryCancel() override {
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
    }
    stream_->Cancel();
  }
  std::string Peer() const override { return "ipv4:192.0.2.1:40000"; }

 private:
  FakeStream* const stream_;
  mutable absl::Mutex mu_;
  bool cancelled_ = false;
};

// Bytes a command prints: a pattern, so a few input bytes ask for many.
std::string Pattern(size_t n, char base) {
  std::string s(n, base);
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(base + i % 23);
  return s;
}

struct Input {
  FakeCommandScript script;
  bool waits = false;
  int write_budget = 0;
  size_t chunk = 1;
  std::vector<std::string> frames;
};

Input Decode(const uint8_t* data, size_t size) {
  Input in;
  auto byte = [&](size_t i) -> uint8_t { return i < size ? data[i] : 0; };
  const uint8_t flags = byte(0);
  in.waits = flags & 1;
  in.script.reads_stdin = flags & 2;
  switch ((flags >> 2) & 3) {
    case 1:
      in.script.ends = FakeCommandScript::Ends::kOnStdinClose;
      break;
    case 2:
      in.script.ends = FakeCommandScript::Ends::kOnSignal;
      break;
    default:
      in.script.ends = FakeCommandScript::Ends::kAtOnce;
  }
  in.script.exit.signaled = flags & 16;
  in.script.exit.code = in.script.exit.signaled ? 1 + byte(1) % 64 : byte(1);
  in.chunk = size_t{1} << (byte(2) % 16);
  in.write_budget = byte(3);
  const size_t out = ((byte(4) << 8) | byte(5)) % kMaxOutputBytes;
  const size_t err = ((byte(6) << 8) | byte(7)) % kMaxOutputBytes;
  in.script.stdout_data = Pattern(out, 'a');
  in.script.stderr_data = Pattern(err, 'A');
  size_t i = 8;
  while (i < size) {
    const size_t n = (byte(i) << 8) | byte(i + 1);
    i += 2;
    const size_t take = i < size ? std::min(n, size - i) : 0;
    in.frames.emplace_back(reinterpret_cast<const char*>(data) + i, take);
    i += take;
  }
  return in;
}

// What the command should have got: the stdin data before the first close
// (capped, see kMaxStdinBytes) and the signals in range; over the frames
// that parse.
struct Sent {
  std::string stdin_data;
  std::vector<int> signals;
  size_t stdin_total = 0;
};

Sent Expected(const std::vector<std::string>& frames, bool reads_stdin) {
  Sent sent;
  bool open = reads_stdin;
  for (size_t k = 1; k < frames.size(); ++k) {
    SpawnRequest req;
    if (frames[k].size() > kMaxMessageBytes ||
        !req.ParseFromString(frames[k])) {
      break;
    }
    if (req.kind_case() == SpawnRequest::kStdinData) {
      sent.stdin_total += req.stdin_data().size();
      if (open) sent.stdin_data += req.stdin_data();
    } else if (req.kind_case() == SpawnRequest::kStdinClose) {
      open = false;
    } else if (req.kind_case() == SpawnRequest::kSignal && req.signal() > 0 &&
               req.signal() < NSIG) {
      sent.signals.push_back(req.signal());
    }
  }
  return sent;
}

bool IsPrefix(const std::string& prefix, const std::string& of) {
  return of.compare(0, prefix.size(), prefix) == 0;
}

bool IsPrefix(const std::vector<int>& prefix, const std::vector<int>& of) {
  return prefix.size() <= of.size() &&
         std::equal(prefix.begin(), prefix.end(), of.begin());
}

int FuzzOneCall(const uint8_t* data, size_t size) {
  Input in = Decode(data, size);
  const Sent sent = Expected(in.frames, in.script.reads_stdin);
  if (sent.stdin_total > kMaxStdinBytes) return 0;  // see kMaxStdinBytes
  FakeStream stream(in.frames, in.waits, in.write_budget, in.chunk);
  if (in.waits) stream.AddTail();
  FakeContext ctx(&stream);
  FakeCommandLog log;
  SpawnLimits limits;
  limits.output_chunk_bytes = static_cast<int>(in.chunk);
  limits.max_message_bytes = kMaxMessageBytes;
  limits.kill_grace = absl::ZeroDuration();
  const grpc::Status status =
      ServeSpawnCall(&ctx, &stream, FakeCommand::Starter(in.script, &log),
                     {{"PATH", "/usr/bin:/bin"}}, limits);

  SpawnRequest first;
  const bool runs =
      !in.frames.empty() && in.frames[0].size() <= kMaxMessageBytes &&
      first.ParseFromString(in.frames[0]) &&
      first.kind_case() == SpawnRequest::kCommand && !first.command().empty();
  const bool broken = stream.Broken();
  absl::MutexLock lock(&stream.mu_);
  if (!runs) {
    FUZZ_CHECK(log.started == 0);
    FUZZ_CHECK(!status.ok());
    FUZZ_CHECK(stream.out_.empty() && stream.err_.empty());
    FUZZ_CHECK(!stream.exit_sent_);
    return 0;
  }
  FUZZ_CHECK(log.started == 1 && log.command == first.command());
  FUZZ_CHECK(log.end_group_calls >= 1 && log.exit.has_value());
  FUZZ_CHECK(IsPrefix(stream.out_, log.stdout_written));
  FUZZ_CHECK(IsPrefix(stream.err_, log.stderr_written));
  FUZZ_CHECK(IsPrefix(log.stdin_received, sent.stdin_data));
  FUZZ_CHECK(IsPrefix(log.signals, sent.signals) ||
             IsPrefix(sent.signals, log.signals));
  if (stream.exit_sent_) {
    FUZZ_CHECK(stream.out_ == log.stdout_written);
    FUZZ_CHECK(stream.err_ == log.stderr_written);
    const CommandExit& e = *log.exit;
    FUZZ_CHECK(e.signaled ? stream.exit_.exit_signal() == e.code
                          : stream.exit_.exit_status() == e.code);
  }
  // A caller that waits, on a stream that neither breaks nor stops taking
  // replies, gets everything: the whole exchange is deterministic.
  if (in.waits && in.write_budget == 0 && !broken) {
    FUZZ_CHECK(status.ok());
    FUZZ_CHECK(stream.exit_sent_);
    FUZZ_CHECK(log.stdin_received == sent.stdin_data);
  }
  return 0;
}

}  // namespace
}  // namespace distjob

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  distjob::InitLogging(distjob::LogLevel::kOff);
  // As the spawn server does: a command that closed its stdin must not
  // end the process that writes to it.
  std::signal(SIGPIPE, SIG_IGN);
  // A frame that does not parse is the point; protobuf's log of it is not.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return distjob::FuzzOneCall(data, size);
}
