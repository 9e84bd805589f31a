// Reply lines of the client protocol, each with its trailing LF. No I/O.
#include "redlockd/protocol/protocol.hpp"

#include <array>
#include <string>

namespace redlockd {
namespace {

constexpr std::array<std::string_view, 14> error_names = {
    "SYNTAX",        "UNKNOWN_COMMAND", "BAD_RESOURCE", "BAD_TTL",         "BAD_OWNER",
    "LINE_TOO_LONG", "NOAUTH",          "AUTH_FAILED",  "TOO_MANY",        "SHUTTING_DOWN",
    "INTERNAL",      "BAD_COUNT",       "BAD_LABEL",    "PERMITS_MISMATCH"};

} // namespace

std::string_view to_string(err_code code) {
  return error_names[static_cast<std::size_t>(code)];
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
      .append(" proto=1.1 nodes=")
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

namespace {

std::string with_counts(std::string line, const status_counts& counts) {
  if (counts.readers > 0)
    line.append(" readers=").append(std::to_string(counts.readers));
  if (counts.permits_used > 0)
    line.append(" permits=")
        .append(std::to_string(counts.permits_used))
        .append("/")
        .append(std::to_string(counts.permits));
  return line + "\n";
}

} // namespace

std::string format_status_free(const status_counts& counts) {
  return with_counts("OK FREE", counts);
}

std::string format_status_held(std::uint64_t pttl_ms, std::string_view label,
                               const status_counts& counts) {
  std::string line = "OK HELD " + std::to_string(pttl_ms);
  if (!label.empty())
    line.append(" label=").append(label);
  return with_counts(std::move(line), counts);
}

} // namespace redlockd
