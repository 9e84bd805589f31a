// Parsing one request line of protocol v1.1 (proto/PROTOCOL.md). Checks come in a fixed order and
// the first problem wins: the number of arguments, the resource(s), the owner, the TTL, then
// the options in the order they were given. No I/O.
#include "redlockd/protocol/protocol.hpp"

#include <algorithm>
#include <charconv>
#include <string>

namespace redlockd {
namespace {

// Reads a line's space-separated tokens one by one (only 0x20 separates; runs of spaces are one
// separator). Lines are at most max_line_bytes long, so counting them first is cheap.
class token_cursor {
 public:
  explicit token_cursor(std::string_view line) : line_(line) {}

  bool done() {
    skip_spaces();
    return pos_ == line_.size();
  }
  // Precondition: !done().
  std::string_view next() {
    skip_spaces();
    const std::size_t start = pos_;
    while (pos_ < line_.size() && line_[pos_] != ' ')
      ++pos_;
    return line_.substr(start, pos_ - start);
  }
  std::size_t left() const {
    token_cursor copy = *this;
    std::size_t count = 0;
    for (; !copy.done(); copy.next())
      ++count;
    return count;
  }

 private:
  void skip_spaces() {
    while (pos_ < line_.size() && line_[pos_] == ' ')
      ++pos_;
  }

  std::string_view line_;
  std::size_t pos_ = 0;
};

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

parse_error bad_count(std::string_view what, std::uint64_t max) {
  return error(err_code::bad_count,
               std::string(what) + " must be an integer between 1 and " + std::to_string(max));
}

std::optional<std::uint64_t> parse_ttl(std::string_view text, const request_limits& limits) {
  const auto value = parse_decimal(text);
  if (!value || *value < limits.min_ttl_ms || *value > limits.max_ttl_ms)
    return std::nullopt;
  return value;
}

std::optional<std::uint32_t> parse_count(std::string_view text, std::uint64_t max) {
  const auto value = parse_decimal(text);
  if (!value || *value < 1 || *value > max)
    return std::nullopt;
  return static_cast<std::uint32_t>(*value);
}

// The options of LOCK and MLOCK, as given.
struct hold_options {
  std::optional<std::uint64_t> wait_ms;
  bool keep = false;
  lock_mode mode = lock_mode::exclusive;
  bool mode_given = false;
  std::uint32_t permits = 0;
  std::optional<std::string_view> label;
  std::optional<std::uint64_t> max_hold_ms;
};

// Reads options up to the end of the line. `verb` names the request in messages; MLOCK takes
// neither SHARED nor PERMITS (`modes` false).
std::optional<parse_error> parse_options(token_cursor& in, std::string_view verb, bool modes,
                                         const request_limits& limits, hold_options& out) {
  const auto twice = [&](std::string_view option) {
    return error(err_code::syntax, std::string(option) + " given twice");
  };
  const auto needs = [&](std::string_view option, std::string_view what) {
    return error(err_code::syntax, std::string(option) + " needs " + std::string(what));
  };
  while (!in.done()) {
    const std::string_view option = in.next();
    if (iequals(option, "KEEP")) {
      if (out.keep)
        return twice("KEEP");
      out.keep = true;
    } else if (iequals(option, "WAIT")) {
      if (out.wait_ms)
        return twice("WAIT");
      if (in.done())
        return needs("WAIT", "a time in ms");
      const auto wait = parse_decimal(in.next());
      if (!wait || *wait > limits.max_ttl_ms)
        return error(err_code::bad_ttl, "WAIT must be an integer between 0 and " +
                                            std::to_string(limits.max_ttl_ms) + " ms");
      out.wait_ms = *wait;
    } else if (modes && iequals(option, "SHARED")) {
      if (out.mode == lock_mode::shared)
        return twice("SHARED");
      if (out.mode_given)
        return error(err_code::syntax, "SHARED and PERMITS exclude each other");
      out.mode = lock_mode::shared;
      out.mode_given = true;
    } else if (modes && iequals(option, "PERMITS")) {
      if (out.mode == lock_mode::permits)
        return twice("PERMITS");
      if (out.mode_given)
        return error(err_code::syntax, "SHARED and PERMITS exclude each other");
      if (in.done())
        return needs("PERMITS", "a number of permits");
      const auto permits = parse_count(in.next(), limits.max_permits);
      if (!permits)
        return bad_count("PERMITS", limits.max_permits);
      out.mode = lock_mode::permits;
      out.mode_given = true;
      out.permits = *permits;
    } else if (iequals(option, "LABEL")) {
      if (out.label)
        return twice("LABEL");
      if (in.done())
        return needs("LABEL", "a label");
      const std::string_view label = in.next();
      if (!is_valid_label(label))
        return error(err_code::bad_label,
                     "label must be 1-64 printable ASCII bytes without spaces");
      out.label = label;
    } else if (iequals(option, "MAXHOLD")) {
      if (out.max_hold_ms)
        return twice("MAXHOLD");
      if (in.done())
        return needs("MAXHOLD", "a time in ms");
      const auto ms = parse_decimal(in.next());
      if (!ms || *ms == 0)
        return error(err_code::bad_ttl, "MAXHOLD must be a positive integer of ms");
      out.max_hold_ms = *ms;
    } else {
      return error(err_code::syntax,
                   modes ? "unknown LOCK option; expected WAIT <ms>, KEEP, SHARED, PERMITS <n>, "
                           "LABEL <label> or MAXHOLD <ms>"
                         : "unknown " + std::string(verb) +
                               " option; expected WAIT <ms>, KEEP, LABEL <label> or MAXHOLD <ms>");
    }
  }
  if (out.max_hold_ms && !out.keep)
    return error(err_code::syntax, "MAXHOLD needs KEEP");
  return std::nullopt;
}

// LOCK <resource> <ttl_ms> and at most WAIT <ms>, KEEP, SHARED | PERMITS <n>, LABEL <label>,
// MAXHOLD <ms>: 12 tokens.
constexpr std::size_t max_lock_tokens = 12;

parse_result parse_lock(token_cursor& in, std::size_t args, const request_limits& limits) {
  if (args < 2 || args > max_lock_tokens - 1)
    return wrong_arity("LOCK");
  lock_request req;
  req.resource = in.next();
  if (!is_valid_resource(req.resource))
    return bad_resource();
  const auto ttl = parse_ttl(in.next(), limits);
  if (!ttl)
    return bad_ttl(limits);
  req.ttl_ms = *ttl;
  hold_options options;
  if (auto e = parse_options(in, "LOCK", true, limits, options))
    return *e;
  req.wait_ms = options.wait_ms;
  req.keep = options.keep;
  req.mode = options.mode;
  req.permits = options.permits;
  req.label = options.label;
  req.max_hold_ms = options.max_hold_ms;
  return request{req};
}

// The `<n> <resource_1> ... <resource_n>` of MLOCK, MUNLOCK and MEXTEND, which then take
// `fixed` more arguments (MLOCK: at least its TTL). `args` counts the arguments after the verb.
std::optional<parse_error> parse_resource_list(token_cursor& in, std::size_t args,
                                               std::size_t fixed, bool more_allowed,
                                               std::string_view verb, const request_limits& limits,
                                               std::vector<std::string_view>& out) {
  if (args < 1 + 1 + fixed)
    return wrong_arity(verb);
  const auto n = parse_count(in.next(), limits.max_resources_per_request);
  if (!n)
    return bad_count(std::string(verb) + " count", limits.max_resources_per_request);
  if (args < 1 + *n + fixed || (!more_allowed && args != 1 + *n + fixed))
    return wrong_arity(verb);
  out.reserve(*n);
  for (std::uint32_t i = 0; i < *n; ++i) {
    out.push_back(in.next());
    if (!is_valid_resource(out.back()))
      return bad_resource();
  }
  std::vector<std::string_view> sorted = out;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    return error(err_code::bad_resource, "a resource is named twice");
  return std::nullopt;
}

// MLOCK <n> <resource_1> ... <resource_n> <ttl_ms> and at most WAIT <ms>, KEEP, LABEL <label>,
// MAXHOLD <ms>: n + 9 arguments.
parse_result parse_mlock(token_cursor& in, std::size_t args, const request_limits& limits) {
  mlock_request req;
  if (auto e = parse_resource_list(in, args, 1, true, "MLOCK", limits, req.resources))
    return *e;
  if (args > 1 + req.resources.size() + 8)
    return wrong_arity("MLOCK");
  const auto ttl = parse_ttl(in.next(), limits);
  if (!ttl)
    return bad_ttl(limits);
  req.ttl_ms = *ttl;
  hold_options options;
  if (auto e = parse_options(in, "MLOCK", false, limits, options))
    return *e;
  req.wait_ms = options.wait_ms;
  req.keep = options.keep;
  req.label = options.label;
  req.max_hold_ms = options.max_hold_ms;
  return request{std::move(req)};
}

parse_result parse_munlock(token_cursor& in, std::size_t args, const request_limits& limits) {
  munlock_request req;
  if (auto e = parse_resource_list(in, args, 1, false, "MUNLOCK", limits, req.resources))
    return *e;
  req.owner = in.next();
  if (!is_valid_owner(req.owner))
    return bad_owner();
  return request{std::move(req)};
}

parse_result parse_mextend(token_cursor& in, std::size_t args, const request_limits& limits) {
  mextend_request req;
  if (auto e = parse_resource_list(in, args, 2, false, "MEXTEND", limits, req.resources))
    return *e;
  req.owner = in.next();
  if (!is_valid_owner(req.owner))
    return bad_owner();
  const auto ttl = parse_ttl(in.next(), limits);
  if (!ttl)
    return bad_ttl(limits);
  req.ttl_ms = *ttl;
  return request{std::move(req)};
}

// LIST [<prefix>] [COUNT <n>]: one argument is the prefix, two are COUNT <n>, three are both.
parse_result parse_list(token_cursor& in, std::size_t args) {
  if (args > 3)
    return wrong_arity("LIST");
  list_request req;
  if (args == 1 || args == 3) {
    req.prefix = in.next();
    if (!is_valid_resource(req.prefix))
      return bad_resource();
  }
  if (args >= 2) {
    if (!iequals(in.next(), "COUNT"))
      return error(err_code::syntax, "unknown LIST option; expected COUNT <n>");
    const auto count = parse_decimal(in.next());
    if (!count || *count == 0)
      return bad_count("COUNT", list_count_max);
    req.count = static_cast<std::uint32_t>(std::min<std::uint64_t>(*count, list_count_max));
  }
  return request{req};
}

} // namespace

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

bool is_valid_label(std::string_view label) {
  return !label.empty() && label.size() <= max_label_bytes && printable(label);
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
  token_cursor in(line);
  if (in.done())
    return std::monostate{};
  const std::size_t args = in.left() - 1;
  const std::string_view verb = in.next();

  if (iequals(verb, "LOCK"))
    return parse_lock(in, args, limits);
  if (iequals(verb, "UNLOCK")) {
    if (args != 2)
      return wrong_arity("UNLOCK");
    const std::string_view resource = in.next();
    if (!is_valid_resource(resource))
      return bad_resource();
    const std::string_view owner = in.next();
    if (!is_valid_owner(owner))
      return bad_owner();
    return request{unlock_request{resource, owner}};
  }
  if (iequals(verb, "EXTEND")) {
    if (args != 3)
      return wrong_arity("EXTEND");
    const std::string_view resource = in.next();
    if (!is_valid_resource(resource))
      return bad_resource();
    const std::string_view owner = in.next();
    if (!is_valid_owner(owner))
      return bad_owner();
    const auto ttl = parse_ttl(in.next(), limits);
    if (!ttl)
      return bad_ttl(limits);
    return request{extend_request{resource, owner, *ttl}};
  }
  if (iequals(verb, "PING")) {
    if (args > 1)
      return wrong_arity("PING");
    ping_request req;
    if (args == 1)
      req.word = in.next();
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
    return request{auth_request{in.next()}};
  }
  if (iequals(verb, "STATUS") || iequals(verb, "BREAK")) {
    const bool status = iequals(verb, "STATUS");
    if (args != 1)
      return wrong_arity(status ? "STATUS" : "BREAK");
    const std::string_view resource = in.next();
    if (!is_valid_resource(resource))
      return bad_resource();
    return status ? request{status_request{resource}} : request{break_request{resource}};
  }
  if (iequals(verb, "MLOCK"))
    return parse_mlock(in, args, limits);
  if (iequals(verb, "MUNLOCK"))
    return parse_munlock(in, args, limits);
  if (iequals(verb, "MEXTEND"))
    return parse_mextend(in, args, limits);
  if (iequals(verb, "LIST"))
    return parse_list(in, args);
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

} // namespace redlockd
