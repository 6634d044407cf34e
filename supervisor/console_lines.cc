#include "supervisor/console_lines.h"

#include <cstring>
#include <utility>

#include "common/json.h"

namespace distjob {
namespace {

// Where to cut `text` to at most `limit` bytes without splitting a UTF-8
// sequence (a lead byte is at most 3 bytes back from a cut).
size_t CutPoint(absl::string_view text, size_t limit) {
  size_t cut = limit;
  for (int back = 0; back < 3 && cut > 0; ++back) {
    const unsigned char c = static_cast<unsigned char>(text[cut]);
    if ((c & 0xC0) != 0x80) return cut;
    --cut;
  }
  const unsigned char c = static_cast<unsigned char>(text[cut]);
  return (c & 0xC0) != 0x80 && cut > 0 ? cut : limit;
}

}  // namespace

ConsoleLines::ConsoleLines(std::string prefix, size_t max_line)
    : prefix_(std::move(prefix)), max_line_(max_line > 0 ? max_line : 1) {}

void ConsoleLines::EmitJson(absl::string_view text, std::string* out) {
  if (!text.empty() && (text.back() == '\n' || text.back() == '\r')) {
    const bool cr = text.back() == '\r';
    text.remove_suffix(1);
    if (text.empty() && cr) return;  // a bare redraw carries no text
  }
  Json line = json_fields_;
  line["line"] = std::string(text);
  out->append(DumpJson(line));  // invalid UTF-8 becomes U+FFFD
  out->push_back('\n');
  mid_line_ = false;
}

void ConsoleLines::EmitLine(absl::string_view text, std::string* out) {
  if (!json_fields_.is_null()) {
    EmitJson(text, out);
    return;
  }
  // A bare '\r' at the start of a line moves nothing: the prefix belongs
  // to the text drawn after it.
  if (!mid_line_ && !(text.size() == 1 && text[0] == '\r')) {
    out->append(prefix_);
  }
  out->append(text.data(), text.size());
  const char last = text.empty() ? '\0' : text.back();
  mid_line_ = last != '\n' && last != '\r';
}

void ConsoleLines::SplitLong(absl::string_view text, std::string* out) {
  while (pending_.size() + text.size() > max_line_) {
    std::string piece = std::move(pending_);
    pending_.clear();
    const size_t room = max_line_ - piece.size();
    const size_t cut = room < text.size() ? CutPoint(text, room) : text.size();
    piece.append(text.data(), cut);
    text.remove_prefix(cut);
    piece.push_back('\n');
    EmitLine(piece, out);
  }
  pending_.append(text.data(), text.size());
}

void ConsoleLines::Feed(absl::string_view chunk, std::string* out) {
  const char* p = chunk.data();
  const char* const end = p + chunk.size();
  // memchr for each terminator, each searched again only once passed, so
  // every byte is looked at a bounded number of times.
  const char* next_nl = static_cast<const char*>(std::memchr(p, '\n', end - p));
  const char* next_cr = static_cast<const char*>(std::memchr(p, '\r', end - p));
  while (p < end) {
    if (after_cr_ && pending_.empty() && !mid_line_ && *p == '\n') {
      // The '\n' of a "\r\n" (in this read or the next): the line already
      // left with its '\r'; it gets its newline, not a line of its own.
      if (json_fields_.is_null()) out->push_back('\n');
      after_cr_ = false;
      ++p;
      continue;
    }
    if (next_nl != nullptr && next_nl < p) {
      next_nl = static_cast<const char*>(std::memchr(p, '\n', end - p));
    }
    if (next_cr != nullptr && next_cr < p) {
      next_cr = static_cast<const char*>(std::memchr(p, '\r', end - p));
    }
    const char* term = next_nl;
    if (next_cr != nullptr && (term == nullptr || next_cr < term)) {
      term = next_cr;
    }
    if (term == nullptr) {
      SplitLong(absl::string_view(p, static_cast<size_t>(end - p)), out);
      break;
    }
    const absl::string_view line(p, static_cast<size_t>(term - p));
    if (pending_.empty() && line.size() <= max_line_) {
      EmitLine(absl::string_view(p, line.size() + 1), out);
    } else {
      SplitLong(line, out);
      pending_.push_back(*term);
      EmitLine(pending_, out);
      pending_.clear();
    }
    after_cr_ = *term == '\r';
    p = term + 1;
  }
  if (after_cr_ && !pending_.empty()) {
    EmitLine(pending_, out);
    pending_.clear();
  }
}

void ConsoleLines::Finish(std::string* out) {
  if (!pending_.empty()) {
    pending_.push_back('\n');
    EmitLine(pending_, out);
    pending_.clear();
  } else if (mid_line_) {
    out->push_back('\n');
    mid_line_ = false;
  }
}

}  // namespace distjob
