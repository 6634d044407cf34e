// The console side of --tee: turns a worker's output stream, as it is read,
// into console bytes with the rank's prefix at the start of every line.
//
// - A line ends at '\n' or '\r'. Progress output (tqdm redraws its bar
//   after a '\r' and writes no newline until it is done) is passed through
//   as it comes: the text after a '\r' leaves at the end of every read.
// - The line buffer is bounded: a line longer than `max_line` bytes leaves
//   in pieces of at most that size, each ended with '\n' (never inside a
//   UTF-8 sequence), so memory and work stay linear in the output.
// - Every line leaves through EmitLine: the one point where a per-line
//   policy hooks in.
#ifndef DISTJOB_SUPERVISOR_CONSOLE_LINES_H_
#define DISTJOB_SUPERVISOR_CONSOLE_LINES_H_

#include <cstddef>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"
#include "common/json.h"

namespace distjob {

inline constexpr size_t kMaxConsoleLine = 64 * 1024;

class ConsoleLines {
 public:
  explicit ConsoleLines(std::string prefix, size_t max_line = kMaxConsoleLine);

  // Appends to `out` the console bytes for the next `chunk` of the stream.
  void Feed(absl::string_view chunk, std::string* out);
  // The end of the stream: an unfinished line gets its newline.
  void Finish(std::string* out);

  // Each line (each piece a long or '\r'-drawn line leaves in) becomes one
  // JSON object on a line of its own: `fields` and "line", the piece
  // without its terminator (invalid UTF-8 replaced); the prefix is not used.
  void SetJsonFields(Json fields) { json_fields_ = std::move(fields); }

 private:
  // One piece of a line: `text` is its bytes, terminator included if any.
  // The prefix goes first unless this line's start already left.
  void EmitLine(absl::string_view text, std::string* out);
  // Emits pending_ + `text` (no terminator of its own) in pieces of at
  // most max_line_ bytes, each ended with '\n', and keeps the rest (at
  // most max_line_ bytes, not empty if anything was left) in pending_.
  void SplitLong(absl::string_view text, std::string* out);

  void EmitJson(absl::string_view text, std::string* out);

  const std::string prefix_;
  Json json_fields_;  // null: text
  const size_t max_line_;
  std::string pending_;    // the current line's bytes not yet sent
  bool mid_line_ = false;  // part of the current line already left
  bool after_cr_ = false;  // the current line follows a '\r'
};

}  // namespace distjob

#endif  // DISTJOB_SUPERVISOR_CONSOLE_LINES_H_
