// Client protocol v1.1 (proto/PROTOCOL.md): request parsing (parse_request.cpp), reply
// formatting (format_reply.cpp) and line splitting (line_splitter.cpp). No I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace redlockd {

// The CODE of an `ERR <CODE> message` reply: protocol v1's in the order the spec lists them,
// then v1.1's (err_code, not error_code: Boost's error_code_t is next to it in the I/O layer).
enum class err_code : std::uint8_t {
  syntax,
  unknown_command,
  bad_resource,
  bad_ttl,
  bad_owner,
  line_too_long,
  noauth,
  auth_failed,
  too_many,
  shutting_down,
  internal,
  bad_count,        // PERMITS n, MLOCK n or LIST COUNT n out of range
  bad_label,        // LABEL not 1..64 bytes of 0x21-0x7E
  permits_mismatch, // PERMITS n differs from the n of the permits held
};

// "SYNTAX", "UNKNOWN_COMMAND", ...
std::string_view to_string(err_code code);

// Limits the parser enforces; filled from the config.
struct request_limits {
  std::uint64_t min_ttl_ms = 10;
  std::uint64_t max_ttl_ms = 3'600'000;
  std::uint32_t max_permits = 1024;             // PERMITS <n>
  std::uint32_t max_resources_per_request = 64; // MLOCK / MUNLOCK / MEXTEND <n>
};

inline constexpr std::size_t max_resource_bytes = 256;
inline constexpr std::size_t owner_hex_chars = 40;
inline constexpr std::size_t max_label_bytes = 64;
// LIST answers at most this many resources; a larger COUNT is clamped to it.
inline constexpr std::uint32_t list_count_default = 100;
inline constexpr std::uint32_t list_count_max = 1000;

// Parsed requests. string_views point into the line given to parse_request().
struct ping_request {
  std::optional<std::string_view> word;
};
struct hello_request {};
struct auth_request {
  std::string_view secret;
};
// What a LOCK asks for: an exclusive lock (v1), a shared (read) lock, or one of n permits.
enum class lock_mode : std::uint8_t { exclusive, shared, permits };

struct lock_request {
  std::string_view resource;
  std::uint64_t ttl_ms = 0;
  std::optional<std::uint64_t> wait_ms; // WAIT <ms>
  bool keep = false;                    // KEEP
  lock_mode mode = lock_mode::exclusive;
  std::uint32_t permits = 0;                // PERMITS <n>: 1..max_permits
  std::optional<std::string_view> label;    // LABEL <label>
  std::optional<std::uint64_t> max_hold_ms; // MAXHOLD <ms> (only with KEEP)
};
// MLOCK <n> <resource_1> ... <resource_n> <ttl_ms> [options]: several resources, all or nothing.
// The options are LOCK's but SHARED and PERMITS.
struct mlock_request {
  std::vector<std::string_view> resources; // as the client named them, each once
  std::uint64_t ttl_ms = 0;
  std::optional<std::uint64_t> wait_ms;
  bool keep = false;
  std::optional<std::string_view> label;
  std::optional<std::uint64_t> max_hold_ms;
};
struct munlock_request {
  std::vector<std::string_view> resources;
  std::string_view owner;
};
struct mextend_request {
  std::vector<std::string_view> resources;
  std::string_view owner;
  std::uint64_t ttl_ms = 0;
};
// LIST [<prefix>] [COUNT <n>]
struct list_request {
  std::string_view prefix; // empty: every resource
  std::uint32_t count = list_count_default;
};
struct break_request {
  std::string_view resource;
};
struct unlock_request {
  std::string_view resource;
  std::string_view owner;
};
struct extend_request {
  std::string_view resource;
  std::string_view owner;
  std::uint64_t ttl_ms = 0;
};
struct status_request {
  std::string_view resource;
};
struct info_request {};
struct quit_request {};

struct parse_error {
  err_code code;
  std::string message; // one line, no LF
};

using request =
    std::variant<ping_request, hello_request, auth_request, lock_request, unlock_request,
                 extend_request, info_request, quit_request, status_request, mlock_request,
                 munlock_request, mextend_request, list_request, break_request>;

// Result of parsing one line (without its LF / CRLF):
// - std::monostate: an empty (or all-space) line, which is ignored and gets no reply;
// - request: a well-formed request;
// - parse_error: answer "ERR <CODE> <message>".
using parse_result = std::variant<std::monostate, request, parse_error>;

parse_result parse_request(std::string_view line, const request_limits& limits);

// Validators shared by the parser and by tests.
bool is_valid_resource(std::string_view resource);
bool is_valid_owner(std::string_view owner);
bool is_valid_label(std::string_view label);
// Strict decimal: digits only, no sign, no leading '+', fits in uint64.
std::optional<std::uint64_t> parse_decimal(std::string_view text);

// Splits a byte stream into lines. Strips LF and one CR before it.
class line_splitter {
 public:
  explicit line_splitter(std::size_t max_line_bytes) : max_line_bytes_(max_line_bytes) {}

  enum class status : std::uint8_t { line, need_more, too_long };

  // Appends received bytes.
  void feed(std::string_view bytes) { buffer_.append(bytes); }

  // Takes the next complete line. `line` stays valid until the next call to next() or feed().
  // too_long: the current line exceeds max_line_bytes (content without LF/CRLF); it is reported
  // as soon as that many bytes are buffered without a LF, so a client cannot make us buffer more.
  status next(std::string_view& line);

  std::size_t buffered() const { return buffer_.size() - consumed_; }
  // Bytes the buffer holds, used or not.
  std::size_t capacity() const { return buffer_.capacity(); }

  // After a burst: gives back the capacity a burst left if it is over `keep` bytes, keeping the
  // unfinished line (copied when it is no longer than `keep`; a longer one keeps the buffer).
  void release_spare(std::size_t keep);

 private:
  std::size_t max_line_bytes_;
  std::string buffer_;
  std::size_t consumed_ = 0;
  std::size_t scanned_ = 0; // bytes after consumed_ known to hold no LF: never rescanned
};

// Reply lines. Each returns the full line including the trailing LF.
std::string format_ok();
std::string format_pong(std::optional<std::string_view> word);
std::string format_hello(std::string_view version, std::size_t nodes, std::size_t quorum);
std::string format_lock_ok(std::string_view owner, std::uint64_t fence, std::int64_t validity_ms);
std::string format_extend_ok(std::int64_t validity_ms);
std::string format_busy(std::uint64_t retry_ms);
std::string format_noquorum(std::size_t granted, std::size_t needed);
std::string format_notheld();
std::string format_error(err_code code, std::string_view message);
std::string format_info(std::string_view json_one_line);
std::string format_lost(std::string_view resource, std::string_view owner);
// STATUS: "OK FREE" or "OK HELD <pttl_ms>", with " label=<label>" when the hold has one,
// " readers=<k>" when shared holders hold it, and " permits=<in use>/<n>" when the semaphore of
// that name has permits in use.
struct status_counts {
  std::uint64_t readers = 0;
  std::uint64_t permits_used = 0;
  std::uint64_t permits = 0;
};
std::string format_status_free(const status_counts& counts = {});
std::string format_status_held(std::uint64_t pttl_ms, std::string_view label = {},
                               const status_counts& counts = {});

} // namespace redlockd
