// The connection handshake of a Redis link, composed and decoded without I/O.
#include "redlockd/redis/link_handshake.hpp"

#include "redlockd/resp/resp.hpp"
#include "redlockd/resp/scripts.hpp"

#include <algorithm>

namespace redlockd {
namespace {

link_request make_request(request_kind kind, std::uint32_t op,
                          std::initializer_list<std::string_view> args) {
  link_request request{request_tag{kind, op, 0}, {}};
  append_command(request.command, args);
  return request;
}

void append_script_loads(std::vector<link_request>& out, request_kind kind) {
  for (std::uint32_t i = 0; i < script_count; ++i)
    out.push_back(make_request(kind, i, {"SCRIPT", "LOAD", script_source(static_cast<script>(i))}));
}

// Redis's own text ("WRONGPASS ...") says why AUTH failed; it never holds the password, but it
// is scrubbed anyway in case a future server echoes its argument.
std::string scrubbed(std::string text, const std::string& password) {
  if (password.empty())
    return text;
  for (auto at = text.find(password); at != std::string::npos; at = text.find(password, at + 3))
    text.replace(at, password.size(), "***");
  return text;
}

handshake_event event_of(handshake_event::kind what, std::string_view detail = {}) {
  handshake_event event;
  event.what = what;
  event.detail = detail;
  return event;
}

} // namespace

std::vector<link_request> link_handshake::begin() {
  std::vector<link_request> requests;
  password_ = cfg_.redis_password;
  facts_ = {};
  if (!password_.empty()) {
    if (cfg_.redis_username.empty())
      requests.push_back(make_request(request_kind::auth, 0, {"AUTH", password_}));
    else
      requests.push_back(
          make_request(request_kind::auth, 0, {"AUTH", cfg_.redis_username, password_}));
  }
  append_script_loads(requests, request_kind::load_script);
  requests.push_back(make_request(request_kind::read_fence, 0, {"GET", cfg_.fence_key}));
  requests.push_back(
      make_request(request_kind::read_max_ttl, 0, {"GET", cfg_.fence_key + ":max_ttl"}));
  requests.push_back(make_request(request_kind::info_server, 0, {"INFO", "server"}));
  requests.push_back(make_request(request_kind::info_memory, 0, {"INFO", "memory", "persistence"}));
  left_ = requests.size();
  return requests;
}

std::vector<link_request> link_handshake::script_reloads() {
  std::vector<link_request> requests;
  append_script_loads(requests, request_kind::reload_script);
  return requests;
}

bool link_handshake::handles(request_kind kind) {
  switch (kind) {
  case request_kind::auth:
  case request_kind::load_script:
  case request_kind::read_fence:
  case request_kind::read_max_ttl:
  case request_kind::info_server:
  case request_kind::info_memory:
  case request_kind::reload_script:
    return true;
  default:
    return false;
  }
}

handshake_event link_handshake::counted(handshake_event event) {
  if (left_ > 0 && --left_ == 0)
    event.complete = true;
  return event;
}

handshake_event link_handshake::decode(const request_tag& tag, const redisReply& reply) {
  using kind = handshake_event::kind;
  const std::string_view text = as_string(reply);
  switch (tag.kind) {
  case request_kind::auth:
    if (is_error(reply))
      return event_of(kind::auth_refused, scrubbed(std::string(text), password_));
    return counted(event_of(kind::auth_accepted));
  case request_kind::load_script:
  case request_kind::reload_script: {
    if (is_error(reply) || tag.op >= script_count ||
        text != script_sha(static_cast<script>(tag.op)))
      return event_of(kind::script_refused, text);
    if (tag.kind == request_kind::load_script)
      return counted(event_of(kind::accepted));
    return event_of(tag.op + 1 == script_count ? kind::scripts_reloaded : kind::accepted);
  }
  case request_kind::read_fence:
  case request_kind::read_max_ttl: {
    std::uint64_t value = 0;
    if (is_error(reply) || !parse_counter(text.data(), text.size(), value))
      return event_of(kind::fence_unreadable, text);
    if (tag.kind == request_kind::read_max_ttl)
      facts_.max_ttl_ms = value;
    else
      facts_.fence = is_nil(reply) ? std::nullopt : std::optional<std::uint64_t>(value);
    return counted(event_of(kind::accepted));
  }
  case request_kind::info_server: {
    facts_.run_id = info_field(text, "run_id");
    std::uint64_t uptime_s = 0;
    const std::string_view uptime = info_field(text, "uptime_in_seconds");
    parse_counter(uptime.data(), uptime.size(), uptime_s);
    facts_.uptime_ms = uptime_s * 1000;
    handshake_event event = event_of(kind::identified);
    event.facts = std::move(facts_);
    facts_ = {};
    return counted(std::move(event));
  }
  case request_kind::info_memory: {
    handshake_event event = event_of(kind::storage);
    event.storage.maxmemory_policy = info_field(text, "maxmemory_policy");
    event.storage.aof_enabled = info_field(text, "aof_enabled") == "1";
    return counted(std::move(event));
  }
  default:
    return event_of(kind::accepted); // not a handshake reply (see handles())
  }
}

std::optional<master_time> decode_time(const redisReply& reply) {
  if (array_size(reply) != 2)
    return std::nullopt;
  master_time time;
  const auto s_text = as_string(array_at(reply, 0));
  const auto us_text = as_string(array_at(reply, 1));
  if (!parse_counter(s_text.data(), s_text.size(), time.seconds) ||
      !parse_counter(us_text.data(), us_text.size(), time.micros))
    return std::nullopt;
  return time;
}

std::string_view info_field(std::string_view info, std::string_view name) {
  std::size_t at = 0;
  while (at < info.size()) {
    const std::size_t end = std::min(info.find('\n', at), info.size());
    std::string_view line = info.substr(at, end - at);
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    if (line.size() > name.size() && line.starts_with(name) && line[name.size()] == ':')
      return line.substr(name.size() + 1);
    at = end + 1;
  }
  return {};
}

} // namespace redlockd
