// Splitting a client's byte stream into request lines (proto/PROTOCOL.md, Framing). No I/O.
#include "redlockd/protocol/protocol.hpp"

namespace redlockd {

line_splitter::status line_splitter::next(std::string_view& line) {
  if (consumed_ == buffer_.size()) {
    buffer_.clear();
    consumed_ = 0;
  } else if (consumed_ > 0 && consumed_ * 2 > buffer_.size()) {
    buffer_.erase(0, consumed_); // compact lazily: at most once per half buffer
    consumed_ = 0;
  }
  const std::string_view rest = std::string_view(buffer_).substr(consumed_);
  // Only bytes not looked at before are searched, so a line that trickles in byte by byte costs
  // linear time, not quadratic.
  const std::size_t lf = rest.find('\n', scanned_);
  if (lf == std::string_view::npos) {
    scanned_ = rest.size();
    // A trailing CR may still be the first half of a CRLF: it does not count yet.
    const std::size_t content =
        !rest.empty() && rest.back() == '\r' ? rest.size() - 1 : rest.size();
    return content > max_line_bytes_ ? status::too_long : status::need_more;
  }
  scanned_ = 0;
  std::size_t length = lf;
  if (length > 0 && rest[length - 1] == '\r')
    --length;
  if (length > max_line_bytes_)
    return status::too_long;
  line = rest.substr(0, length);
  consumed_ += lf + 1;
  return status::line;
}

void line_splitter::release_spare(std::size_t keep) {
  if (buffer_.capacity() <= keep || buffered() > keep)
    return;
  std::string rest = buffer_.substr(consumed_); // scanned_ counts from consumed_: still valid
  buffer_.swap(rest);
  consumed_ = 0;
}

} // namespace redlockd
