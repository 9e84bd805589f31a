#include "redlockd/protocol/protocol.hpp"

#include <array>
#include <charconv>
#include <string>

namespace redlockd {
namespace {

constexpr std::array<std::string_view, 11> error_names = {
    "SYNTAX", "UNKNOWN_COMMAND", "BAD_RESOURCE", "BAD_TTL",       "BAD_OWNER", "LINE_TOO_LONG",
    "NOAUTH", "AUTH_FAILED",     "TOO_MANY",     "SHUTTING_DOWN", "INTERNAL"};

// Up to 8 tokens are looked at; more make any verb a syntax error anyway.
constexpr std::size_t max_tokens = 8;

struct tokens {
  std::array<std::string_view, max_tokens> items;
  std::size_t count = 0;
  bool overflow = false;
};

tokens split(std::string_view line) {
  tokens out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ')
      ++i;
    if (i == line.size())
      break;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ')
      ++i;
    if (out.count == max_tokens) {
      out.overflow = true;
      break;
    }
    out.items[out.count++] = line.substr(start, i - start);
  }
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size())
    return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char c = a[i];
    if (c >= 'a' && c <= 'z')
      c = static_cast<char>(c - 'a' + 'A');
    if (c != b[i])
      return false;
  }
  return true;
}

bool printable(std::string_view text) {
  for (char c : text)
    if (c < 0x21 || c > 0x7e)
      return false;
  return true;
}

parse_error error(err_code code, std::string message) {
  return {code, std::move(message)};
}

parse_error wrong_arity(std::string_view verb) {
  return error(err_code::syntax, "wrong number of arguments for '" + std::string(verb) + "'");
}

parse_error bad_resource() {
  return error(err_code::bad_resource,
               "resource must be 1-256 printable ASCII bytes without spaces");
}

parse_error bad_owner() {
  return error(err_code::bad_owner, "owner must be 40 lowercase hex characters");
}

parse_error bad_ttl(const request_limits& limits) {
  return error(err_code::bad_ttl, "ttl must be an integer between " +
                                      std::to_string(limits.min_ttl_ms) + " and " +
                                      std::to_string(limits.max_ttl_ms) + " ms");
}

std::optional<std::uint64_t> parse_ttl(std::string_view text, const request_limits& limits) {
  const auto value = parse_decimal(text);
  if (!value || *value < limits.min_ttl_ms || *value > limits.max_ttl_ms)
    return std::nullopt;
  return value;
}

parse_result parse_lock(const tokens& t, const request_limits& limits) {
  if (t.count < 3 || t.count > 6)
    return wrong_arity("LOCK");
  lock_request req;
  req.resource = t.items[1];
  if (!is_valid_resource(req.resource))
    return bad_resource();
  const auto ttl = parse_ttl(t.items[2], limits);
  if (!ttl)
    return bad_ttl(limits);
  req.ttl_ms = *ttl;
  for (std::size_t i = 3; i < t.count; ++i) {
    if (iequals(t.items[i], "KEEP")) {
      if (req.keep)
        return error(err_code::syntax, "KEEP given twice");
      req.keep = true;
    } else if (iequals(t.items[i], "WAIT")) {
      if (req.wait_ms)
        return error(err_code::syntax, "WAIT given twice");
      if (i + 1 == t.count)
        return error(err_code::syntax, "WAIT needs a time in ms");
      const auto wait = parse_decimal(t.items[++i]);
      if (!wait || *wait > limits.max_ttl_ms)
        return error(err_code::bad_ttl, "WAIT must be an integer between 0 and " +
                                            std::to_string(limits.max_ttl_ms) + " ms");
      req.wait_ms = *wait;
    } else {
      return error(err_code::syntax, "unknown LOCK option; expected WAIT <ms> or KEEP");
    }
  }
  return request{req};
}

} // namespace

std::string_view to_string(err_code code) {
  return error_names[static_cast<std::size_t>(code)];
}

bool is_valid_resource(std::string_view resource) {
  return !resource.empty() && resource.size() <= max_resource_bytes && printable(resource);
}

bool is_valid_owner(std::string_view owner) {
  if (owner.size() != owner_hex_chars)
    return false;
  for (char c : owner)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return false;
  return true;
}

std::optional<std::uint64_t> parse_decimal(std::string_view text) {
  if (text.empty() || text.size() > 20)
    return std::nullopt;
  for (char c : text)
    if (c < '0' || c > '9')
      return std::nullopt;
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size())
    return std::nullopt;
  return value;
}

parse_result parse_request(std::string_view line, const request_limits& limits) {
  const tokens t = split(line);
  if (t.count == 0)
    return std::monostate{};
  const std::string_view verb = t.items[0];
  const std::size_t args = t.overflow ? max_tokens : t.count - 1;

  if (iequals(verb, "PING")) {
    if (args > 1)
      return wrong_arity("PING");
    ping_request req;
    if (args == 1)
      req.word = t.items[1];
    return request{req};
  }
  if (iequals(verb, "HELLO")) {
    if (args != 0)
      return wrong_arity("HELLO");
    return request{hello_request{}};
  }
  if (iequals(verb, "AUTH")) {
    if (args != 1)
      return wrong_arity("AUTH");
    return request{auth_request{t.items[1]}};
  }
  if (iequals(verb, "LOCK")) {
    if (t.overflow)
      return wrong_arity("LOCK");
    return parse_lock(t, limits);
  }
  if (iequals(verb, "UNLOCK")) {
    if (args != 2)
      return wrong_arity("UNLOCK");
    if (!is_valid_resource(t.items[1]))
      return bad_resource();
    if (!is_valid_owner(t.items[2]))
      return bad_owner();
    return request{unlock_request{t.items[1], t.items[2]}};
  }
  if (iequals(verb, "EXTEND")) {
    if (args != 3)
      return wrong_arity("EXTEND");
    if (!is_valid_resource(t.items[1]))
      return bad_resource();
    if (!is_valid_owner(t.items[2]))
      return bad_owner();
    const auto ttl = parse_ttl(t.items[3], limits);
    if (!ttl)
      return bad_ttl(limits);
    return request{extend_request{t.items[1], t.items[2], *ttl}};
  }
  if (iequals(verb, "STATUS")) {
    if (args != 1)
      return wrong_arity("STATUS");
    if (!is_valid_resource(t.items[1]))
      return bad_resource();
    return request{status_request{t.items[1]}};
  }
  if (iequals(verb, "INFO")) {
    if (args != 0)
      return wrong_arity("INFO");
    return request{info_request{}};
  }
  if (iequals(verb, "QUIT")) {
    if (args != 0)
      return wrong_arity("QUIT");
    return request{quit_request{}};
  }
  // Echo the verb only when it is safe to put on one line.
  if (verb.size() <= 32 && printable(verb))
    return error(err_code::unknown_command, "unknown command '" + std::string(verb) + "'");
  return error(err_code::unknown_command, "unknown command");
}

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

std::string format_ok() {
  return "OK\n";
}

std::string format_pong(std::optional<std::string_view> word) {
  if (!word)
    return "PONG\n";
  std::string out = "PONG ";
  out.append(*word).push_back('\n');
  return out;
}

std::string format_hello(std::string_view version, std::size_t nodes, std::size_t quorum) {
  std::string out = "OK redlockd ";
  out.append(version)
      .append(" proto=1 nodes=")
      .append(std::to_string(nodes))
      .append(" quorum=")
      .append(std::to_string(quorum))
      .push_back('\n');
  return out;
}

std::string format_lock_ok(std::string_view owner, std::uint64_t fence, std::int64_t validity_ms) {
  std::string out = "OK ";
  out.append(owner)
      .append(" ")
      .append(std::to_string(fence))
      .append(" ")
      .append(std::to_string(validity_ms))
      .push_back('\n');
  return out;
}

std::string format_extend_ok(std::int64_t validity_ms) {
  return "OK " + std::to_string(validity_ms) + "\n";
}

std::string format_busy(std::uint64_t retry_ms) {
  return "BUSY " + std::to_string(retry_ms) + "\n";
}

std::string format_noquorum(std::size_t granted, std::size_t needed) {
  return "NOQUORUM " + std::to_string(granted) + " " + std::to_string(needed) + "\n";
}

std::string format_notheld() {
  return "NOTHELD\n";
}

std::string format_error(err_code code, std::string_view message) {
  std::string out = "ERR ";
  out.append(to_string(code));
  if (!message.empty()) {
    out.push_back(' ');
    for (char c : message)
      out.push_back(c < 0x20 || c == 0x7f ? ' ' : c); // one line, whatever the message holds
  }
  out.push_back('\n');
  return out;
}

std::string format_info(std::string_view json_one_line) {
  std::string out = "OK ";
  out.append(json_one_line).push_back('\n');
  return out;
}

std::string format_lost(std::string_view resource, std::string_view owner) {
  std::string out = "LOST ";
  out.append(resource).append(" ").append(owner).push_back('\n');
  return out;
}

std::string format_status_free() {
  return "OK FREE\n";
}

std::string format_status_held(std::uint64_t pttl_ms) {
  return "OK HELD " + std::to_string(pttl_ms) + "\n";
}

} // namespace redlockd
