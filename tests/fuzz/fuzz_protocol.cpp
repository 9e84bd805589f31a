// Fuzzes the client protocol: line_splitter fed whole and in small chunks, then parse_request
// on every line and the reply formatters on what it parsed.
//
// Input: byte 0 picks max_line_bytes (64..4096), byte 1 seeds the chunk sizes, the rest is
// what a client sends.
#include "redlockd/protocol/protocol.hpp"

#include <string>
#include <vector>

#include "fuzz_input.hpp"

namespace {

using namespace redlockd;
using redlockd::fuzz::require;

struct split_result {
  std::vector<std::string> lines;
  bool too_long = false;
};

// What the splitter must do, written the plain way: split on LF, drop one CR before it.
split_result reference_split(std::string_view stream, std::size_t max_line_bytes) {
  split_result out;
  while (true) {
    const std::size_t lf = stream.find('\n');
    if (lf == std::string_view::npos) {
      const std::size_t content =
          !stream.empty() && stream.back() == '\r' ? stream.size() - 1 : stream.size();
      out.too_long = content > max_line_bytes;
      return out;
    }
    std::string_view line = stream.substr(0, lf);
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    if (line.size() > max_line_bytes) {
      out.too_long = true;
      return out;
    }
    out.lines.emplace_back(line);
    stream.remove_prefix(lf + 1);
  }
}

// Feeds `stream` in chunks (one chunk when chunks is null), taking lines after every chunk the
// way client_session does, and checks the splitter's own promises on the way.
split_result run_splitter(std::string_view stream, std::size_t max_line_bytes,
                          fuzz::chunker* chunks) {
  line_splitter splitter(max_line_bytes);
  split_result out;
  std::size_t fed = 0;
  std::size_t consumed = 0;
  while (fed < stream.size()) {
    const std::size_t n = chunks ? chunks->next(stream.size() - fed) : stream.size();
    splitter.feed(stream.substr(fed, n));
    fed += n;
    std::string_view line;
    for (;;) {
      const auto status = splitter.next(line);
      if (status == line_splitter::status::too_long) {
        out.too_long = true;
        return out;
      }
      if (status == line_splitter::status::need_more) {
        // A client cannot make the daemon hold more than one line (plus a CR) of its bytes.
        require(splitter.buffered() <= max_line_bytes + 1, "need_more with an over-long buffer");
        break;
      }
      require(line.size() <= max_line_bytes, "a line longer than max_line_bytes");
      require(line.find('\n') == std::string_view::npos, "a line holds a LF");
      consumed += line.size() + 1;
      out.lines.emplace_back(line);
    }
    // Every byte fed is in a line, its LF, a dropped CR or still buffered: none invented, none
    // lost. `consumed` does not count dropped CRs, at most one per line.
    require(consumed + splitter.buffered() <= fed, "lines hold more bytes than were fed");
    require(fed <= consumed + out.lines.size() + splitter.buffered(), "bytes went missing");
  }
  return out;
}

bool one_line(const std::string& reply) {
  return !reply.empty() && reply.find('\n') == reply.size() - 1;
}

bool within(std::string_view part, std::string_view whole) {
  return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}

std::string joined(const std::vector<std::string_view>& resources) {
  std::string out = std::to_string(resources.size());
  for (std::string_view r : resources)
    out.append(" ").append(r);
  return out;
}

// LOCK's and MLOCK's options, written back in one fixed order.
template <typename Hold>
std::string hold_options(const Hold& r) {
  std::string out;
  if (r.wait_ms)
    out += " WAIT " + std::to_string(*r.wait_ms);
  if (r.keep)
    out += " KEEP";
  if (r.label)
    out += " LABEL " + std::string(*r.label);
  if (r.max_hold_ms)
    out += " MAXHOLD " + std::to_string(*r.max_hold_ms);
  return out;
}

// The request written back the canonical way; parsing it again must give the same request.
std::string canonical(const request& req) {
  return std::visit(
      [](const auto& r) -> std::string {
        using type = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<type, ping_request>)
          return r.word ? "PING " + std::string(*r.word) : "PING";
        else if constexpr (std::is_same_v<type, hello_request>)
          return "HELLO";
        else if constexpr (std::is_same_v<type, auth_request>)
          return "AUTH " + std::string(r.secret);
        else if constexpr (std::is_same_v<type, lock_request>)
          return "LOCK " + std::string(r.resource) + " " + std::to_string(r.ttl_ms) +
                 hold_options(r) + (r.mode == lock_mode::shared ? " SHARED" : "") +
                 (r.mode == lock_mode::permits ? " PERMITS " + std::to_string(r.permits) : "");
        else if constexpr (std::is_same_v<type, mlock_request>)
          return "MLOCK " + joined(r.resources) + " " + std::to_string(r.ttl_ms) + hold_options(r);
        else if constexpr (std::is_same_v<type, munlock_request>)
          return "MUNLOCK " + joined(r.resources) + " " + std::string(r.owner);
        else if constexpr (std::is_same_v<type, mextend_request>)
          return "MEXTEND " + joined(r.resources) + " " + std::string(r.owner) + " " +
                 std::to_string(r.ttl_ms);
        else if constexpr (std::is_same_v<type, unlock_request>)
          return "UNLOCK " + std::string(r.resource) + " " + std::string(r.owner);
        else if constexpr (std::is_same_v<type, extend_request>)
          return "EXTEND " + std::string(r.resource) + " " + std::string(r.owner) + " " +
                 std::to_string(r.ttl_ms);
        else if constexpr (std::is_same_v<type, info_request>)
          return "INFO";
        else if constexpr (std::is_same_v<type, status_request>)
          return "STATUS " + std::string(r.resource);
        else if constexpr (std::is_same_v<type, break_request>)
          return "BREAK " + std::string(r.resource);
        else if constexpr (std::is_same_v<type, list_request>)
          return "LIST " + (r.prefix.empty() ? std::string() : std::string(r.prefix) + " ") +
                 "COUNT " + std::to_string(r.count);
        else
          return "QUIT";
      },
      req);
}

bool same_request(const request& a, const request& b) {
  return canonical(a) == canonical(b);
}

void check_request(std::string_view line, const request& req, const request_limits& limits) {
  std::visit(
      [&](const auto& r) {
        using type = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<type, ping_request>) {
          if (r.word) {
            require(within(*r.word, line), "PING word outside the line");
            require(one_line(format_pong(r.word)), "PONG is not one line");
          }
        } else if constexpr (std::is_same_v<type, auth_request>) {
          require(within(r.secret, line) && !r.secret.empty(), "AUTH secret outside the line");
        } else if constexpr (std::is_same_v<type, lock_request>) {
          require(within(r.resource, line), "resource outside the line");
          require(is_valid_resource(r.resource), "LOCK accepted a bad resource");
          require(r.ttl_ms >= limits.min_ttl_ms && r.ttl_ms <= limits.max_ttl_ms,
                  "LOCK accepted a TTL out of range");
          require(!r.wait_ms || *r.wait_ms <= limits.max_ttl_ms, "LOCK accepted a long WAIT");
          require(one_line(format_lost(r.resource, std::string(owner_hex_chars, 'a'))),
                  "LOST is not one line");
        } else if constexpr (std::is_same_v<type, unlock_request>) {
          require(within(r.resource, line) && within(r.owner, line), "UNLOCK outside the line");
          require(is_valid_resource(r.resource) && is_valid_owner(r.owner),
                  "UNLOCK accepted a bad resource or owner");
        } else if constexpr (std::is_same_v<type, extend_request>) {
          require(within(r.resource, line) && within(r.owner, line), "EXTEND outside the line");
          require(is_valid_resource(r.resource) && is_valid_owner(r.owner),
                  "EXTEND accepted a bad resource or owner");
          require(r.ttl_ms >= limits.min_ttl_ms && r.ttl_ms <= limits.max_ttl_ms,
                  "EXTEND accepted a TTL out of range");
        } else if constexpr (std::is_same_v<type, status_request> ||
                             std::is_same_v<type, break_request>) {
          require(within(r.resource, line), "STATUS/BREAK outside the line");
          require(is_valid_resource(r.resource), "STATUS/BREAK accepted a bad resource");
        } else if constexpr (std::is_same_v<type, mlock_request> ||
                             std::is_same_v<type, munlock_request> ||
                             std::is_same_v<type, mextend_request>) {
          require(!r.resources.empty() && r.resources.size() <= limits.max_resources_per_request,
                  "a resource list of a bad size was accepted");
          for (std::string_view resource : r.resources)
            require(within(resource, line) && is_valid_resource(resource),
                    "a listed resource is bad or outside the line");
        } else if constexpr (std::is_same_v<type, list_request>) {
          require(r.count >= 1 && r.count <= list_count_max, "LIST accepted a bad COUNT");
        }
        if constexpr (std::is_same_v<type, lock_request>) {
          require(r.mode != lock_mode::permits ||
                      (r.permits >= 1 && r.permits <= limits.max_permits),
                  "LOCK accepted a bad PERMITS");
          require(!r.max_hold_ms || r.keep, "MAXHOLD accepted without KEEP");
        }
        if constexpr (std::is_same_v<type, lock_request> || std::is_same_v<type, mlock_request>) {
          require(!r.label || (within(*r.label, line) && is_valid_label(*r.label)),
                  "a bad LABEL was accepted");
        }
      },
      req);
  const std::string again = canonical(req);
  const parse_result reparsed = parse_request(again, limits);
  const auto* same = std::get_if<request>(&reparsed);
  require(same != nullptr && same_request(*same, req), "the canonical request parses otherwise");
}

void check_line(std::string_view line, const request_limits& limits) {
  const parse_result parsed = parse_request(line, limits);
  const bool blank = line.find_first_not_of(' ') == std::string_view::npos;
  require(std::holds_alternative<std::monostate>(parsed) == blank,
          "only blank lines may go unanswered");
  if (const auto* req = std::get_if<request>(&parsed)) {
    check_request(line, *req, limits);
  } else if (const auto* error = std::get_if<parse_error>(&parsed)) {
    // The parser only ever refuses with these; the others belong to the session.
    require(error->code == err_code::syntax || error->code == err_code::unknown_command ||
                error->code == err_code::bad_resource || error->code == err_code::bad_ttl ||
                error->code == err_code::bad_owner || error->code == err_code::bad_count ||
                error->code == err_code::bad_label,
            "the parser returned a session error code");
    const std::string reply = format_error(error->code, error->message);
    require(one_line(reply), "an ERR reply is not one line");
    require(reply.rfind("ERR " + std::string(to_string(error->code)) + " ", 0) == 0,
            "an ERR reply does not start with its code");
    for (char c : reply.substr(0, reply.size() - 1))
      require(c >= 0x20 && c != 0x7f, "an ERR reply holds a control byte");
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2)
    return 0;
  const std::size_t max_line_bytes = 64 + static_cast<std::size_t>(data[0] % 64) * 64;
  fuzz::chunker chunks(data[1]);
  const std::string_view stream = fuzz::as_text(data + 2, size - 2);

  const split_result expected = reference_split(stream, max_line_bytes);
  const split_result whole = run_splitter(stream, max_line_bytes, nullptr);
  const split_result piecewise = run_splitter(stream, max_line_bytes, &chunks);
  require(whole.lines == expected.lines && whole.too_long == expected.too_long,
          "the splitter fed at once differs from a plain split");
  require(piecewise.lines == expected.lines && piecewise.too_long == expected.too_long,
          "the splitter fed in chunks differs from a plain split");

  const request_limits limits; // the defaults: 10..3600000 ms
  for (const std::string& line : expected.lines)
    check_line(line, limits);
  return 0;
}
