#include "master.hpp"

#include <algorithm>
#include <charconv>

namespace redlockd::sim {
namespace {

bool is(std::string_view name, std::string_view upper) {
  return name.size() == upper.size() && std::equal(name.begin(), name.end(), upper.begin(),
                                                   [](char a, char b) { return (a & ~0x20) == b; });
}

// A decimal followed by CRLF at `at`; advances past both.
bool decimal_at(std::string_view bytes, std::size_t& at, std::size_t& value) {
  value = 0;
  const std::size_t start = at;
  while (at < bytes.size() && bytes[at] >= '0' && bytes[at] <= '9')
    value = value * 10 + static_cast<std::size_t>(bytes[at++] - '0');
  if (at == start || at + 1 >= bytes.size() || bytes[at] != '\r' || bytes[at + 1] != '\n')
    return false;
  at += 2;
  return true;
}

// 40 lowercase hex characters, as Redis's run_id.
std::string hex_id(prng& random) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out(40, '0');
  for (char& c : out)
    c = hex[random.below(16)];
  return out;
}

} // namespace

std::size_t parse_command(std::string_view bytes, std::vector<std::string_view>& argv) {
  argv.clear();
  std::size_t at = 1;
  std::size_t count = 0;
  if (bytes.empty() || bytes[0] != '*' || !decimal_at(bytes, at, count))
    return 0;
  for (std::size_t i = 0; i < count; ++i) {
    std::size_t size = 0;
    if (at >= bytes.size() || bytes[at] != '$' || !decimal_at(bytes, ++at, size) ||
        at + size + 2 > bytes.size() || bytes[at + size] != '\r' || bytes[at + size + 1] != '\n')
      return 0;
    argv.emplace_back(bytes.data() + at, size);
    at += size + 2;
  }
  return at;
}

master::master(std::size_t index, scheduler& clock, lua_engine& lua, prng random, master_port& port,
               script_observer& observer)
    : index_(index), clock_(clock), lua_(lua), random_(std::move(random)), port_(port),
      observer_(observer) {
  run_id_ = hex_id(random_);
  started_at_ = clock_.now();
  // Some day in 2023, and each master a little off from the others.
  clock_at_anchor_us_ = 1'700'000'000'000'000 + random_.between(0, 2'000'000);
  anchor_ = clock_.now();
}

std::int64_t master::now_us() const {
  const sim_time elapsed = clock_.now() - anchor_;
  return clock_at_anchor_us_ + elapsed + elapsed * ppm_ / 1'000'000;
}

void master::set_drift(std::int64_t ppm) {
  clock_at_anchor_us_ = now_us();
  anchor_ = clock_.now();
  ppm_ = ppm;
}

std::vector<lost_key> master::jump(std::int64_t us) {
  std::vector<lost_key> lost;
  const std::int64_t before_ms = now_ms();
  clock_at_anchor_us_ += us;
  if (us > 0) {
    const std::int64_t after_ms = now_ms();
    keys_.for_each([&](const std::string& key, const stored& value) {
      const bool live = value.expires_at < 0 || value.expires_at >= before_ms;
      const bool expired = value.expires_at >= 0 && value.expires_at < after_ms;
      if (value.kind == stored::type::string && live && expired)
        lost.push_back({key, value.text});
      if (value.kind != stored::type::zset || !live)
        return;
      // A reader is live while its score (its expiry, master time) has not passed: the jump
      // ends those it skips, and the set's expiry all.
      for (const zset_entry& m : value.members)
        if (m.score >= static_cast<double>(before_ms) &&
            (expired || m.score < static_cast<double>(after_ms)))
          lost.push_back({key, m.member});
    });
  }
  return lost;
}

void master::execute(std::uint64_t connection, std::string_view bytes, std::string& reply) {
  while (!bytes.empty()) {
    const std::size_t used = parse_command(bytes, argv_);
    if (used == 0 || argv_.empty()) {
      resp_writer(reply).error("ERR Protocol error");
      return;
    }
    bytes.remove_prefix(used);
    ++commands_run_;
    const std::size_t reply_from = reply.size();
    observed_ = false;
    run(connection, argv_, reply);
    // Every command a link sends is booked, scripts or not, so that the books' record of a
    // connection stays in step with its replies.
    if (!observed_ && std::find(subscribed_mode_.begin(), subscribed_mode_.end(), connection) ==
                          subscribed_mode_.end())
      observer_.on_script(
          {index_, connection, std::nullopt, {}, {}, std::string_view(reply).substr(reply_from)});
  }
}

void master::run(std::uint64_t connection, std::span<const std::string_view> argv,
                 std::string& reply) {
  resp_writer out(reply);
  const std::string_view name = argv[0];
  const bool subscribed = std::find(subscribed_mode_.begin(), subscribed_mode_.end(), connection) !=
                          subscribed_mode_.end();
  if (subscribed && !is(name, "PING") && !is(name, "SUBSCRIBE")) {
    out.error("ERR Can't execute '" + std::string(name) +
              "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in "
              "this context");
    return;
  }
  if (is(name, "EVALSHA") || is(name, "EVAL")) {
    eval(connection, argv, is(name, "EVALSHA"), reply);
  } else if (is(name, "SCRIPT") && argv.size() == 3 && is(argv[1], "LOAD")) {
    std::string error;
    const int index = lua_.load(argv[2], error);
    if (index < 0) {
      out.error(error);
      return;
    }
    if (loaded_.size() <= static_cast<std::size_t>(index))
      loaded_.resize(static_cast<std::size_t>(index) + 1);
    loaded_[static_cast<std::size_t>(index)] = true;
    out.bulk(lua_.sha(index));
  } else if (is(name, "INFO")) {
    info(reply);
  } else if (is(name, "PING")) {
    if (subscribed) {
      out.array(2);
      out.bulk("pong");
      out.bulk("");
    } else {
      out.status("PONG");
    }
  } else if (is(name, "SUBSCRIBE") && argv.size() >= 2) {
    for (std::size_t i = 1; i < argv.size(); ++i) {
      const std::pair<std::string, std::uint64_t> entry{std::string(argv[i]), connection};
      if (std::find(subscribers_.begin(), subscribers_.end(), entry) == subscribers_.end())
        subscribers_.push_back(entry);
      const auto count = std::count_if(subscribers_.begin(), subscribers_.end(),
                                       [&](const auto& e) { return e.second == connection; });
      out.array(3);
      out.bulk("subscribe");
      out.bulk(argv[i]);
      out.integer(count);
    }
    if (!subscribed)
      subscribed_mode_.push_back(connection);
  } else if (is(name, "FLUSHALL")) {
    take_everything();
    out.status("OK");
  } else if (is(name, "AUTH")) {
    out.error("ERR AUTH <password> called without any password configured for the default user. "
              "Are you sure your configuration is correct?");
  } else {
    command_context ctx{keys_, now_ms(), now_us(), *this};
    run_command(ctx, argv, out);
  }
}

void master::eval(std::uint64_t connection, std::span<const std::string_view> argv, bool by_sha,
                  std::string& reply) {
  resp_writer out(reply);
  if (argv.size() < 3) {
    out.error(by_sha ? "ERR wrong number of arguments for 'evalsha' command"
                     : "ERR wrong number of arguments for 'eval' command");
    return;
  }
  std::int64_t numkeys = 0;
  const auto [end, ec] = std::from_chars(argv[2].data(), argv[2].data() + argv[2].size(), numkeys);
  if (ec != std::errc() || end != argv[2].data() + argv[2].size()) {
    out.error("ERR value is not an integer or out of range");
    return;
  }
  if (numkeys < 0) {
    out.error("ERR Number of keys can't be negative");
    return;
  }
  if (static_cast<std::size_t>(numkeys) > argv.size() - 3) {
    out.error("ERR Number of keys can't be greater than number of args");
    return;
  }
  int index = -1;
  if (by_sha) {
    std::string sha(argv[1]);
    std::transform(sha.begin(), sha.end(), sha.begin(), [](char c) { return c | 0x20; });
    index = lua_.find(sha);
    if (index < 0 || static_cast<std::size_t>(index) >= loaded_.size() ||
        !loaded_[static_cast<std::size_t>(index)]) {
      out.error("NOSCRIPT No matching script. Please use EVAL.");
      return;
    }
  } else {
    std::string error;
    index = lua_.load(argv[1], error);
    if (index < 0) {
      out.error(error);
      return;
    }
    if (loaded_.size() <= static_cast<std::size_t>(index))
      loaded_.resize(static_cast<std::size_t>(index) + 1);
    loaded_[static_cast<std::size_t>(index)] = true; // EVAL caches the script, as Redis does
  }
  const auto keys = argv.subspan(3, static_cast<std::size_t>(numkeys));
  const auto args = argv.subspan(3 + static_cast<std::size_t>(numkeys));
  const std::size_t reply_from = reply.size();
  command_context ctx{keys_, now_ms(), now_us(), *this};
  lua_.run(index, keys, args, ctx, out);
  if (which_.size() <= static_cast<std::size_t>(index)) {
    const std::size_t from = which_.size();
    which_.resize(static_cast<std::size_t>(index) + 1);
    for (std::size_t i = from; i < which_.size(); ++i)
      for (std::size_t s = 0; s < script_count; ++s)
        if (lua_.sha(static_cast<int>(i)) == script_sha(static_cast<script>(s)))
          which_[i] = static_cast<script>(s);
  }
  observed_ = true;
  observer_.on_script({index_, connection, which_[static_cast<std::size_t>(index)], keys, args,
                       std::string_view(reply).substr(reply_from)});
}

void master::info(std::string& reply) const {
  const sim_time uptime = clock_.now() - started_at_;
  std::string text = "# Server\r\nredis_version:7.0.15\r\nrun_id:" + run_id_ +
                     "\r\nuptime_in_seconds:" + std::to_string(uptime / 1'000'000) +
                     "\r\n\r\n# Memory\r\nmaxmemory_policy:noeviction\r\n\r\n# Persistence\r\n"
                     "aof_enabled:1\r\n";
  resp_writer(reply).bulk(text);
}

std::int64_t master::publish(std::string_view channel, std::string_view message) {
  std::int64_t receivers = 0;
  for (const auto& [name, connection] : subscribers_) {
    if (name != channel)
      continue;
    std::string push;
    resp_writer out(push);
    out.array(3);
    out.bulk("message");
    out.bulk(channel);
    out.bulk(message);
    port_.push(connection, std::move(push));
    ++receivers;
  }
  return receivers;
}

void master::disconnected(std::uint64_t connection) {
  std::erase_if(subscribers_, [&](const auto& e) { return e.second == connection; });
  std::erase(subscribed_mode_, connection);
}

std::vector<lost_key> master::take_everything() {
  std::vector<lost_key> lost;
  const std::int64_t now = now_ms();
  keys_.for_each([&](const std::string& key, const stored& value) {
    if (value.expires_at >= 0 && value.expires_at < now)
      return;
    if (value.kind == stored::type::string)
      lost.push_back({key, value.text});
    if (value.kind == stored::type::zset)
      for (const zset_entry& m : value.members)
        if (m.score >= static_cast<double>(now))
          lost.push_back({key, m.member});
  });
  keys_.clear();
  return lost;
}

void master::crash() {
  up_ = false;
  paused_ = false;
  subscribers_.clear();
  subscribed_mode_.clear();
}

std::vector<lost_key> master::restart(bool keep_data) {
  up_ = true;
  ++incarnation_;
  run_id_ = hex_id(random_);
  started_at_ = clock_.now();
  loaded_.clear();
  return keep_data ? std::vector<lost_key>{} : take_everything();
}

std::vector<lost_key> master::flushall() {
  return take_everything();
}

std::vector<lost_key> master::lose_key(std::string_view key) {
  std::vector<lost_key> lost;
  if (const stored* value = keys_.find(key, now_ms()); value) {
    if (value->kind == stored::type::string)
      lost.push_back({std::string(key), value->text});
    if (value->kind == stored::type::zset)
      for (const zset_entry& m : value->members)
        if (m.score >= static_cast<double>(now_ms()))
          lost.push_back({std::string(key), m.member});
  }
  keys_.erase(key);
  return lost;
}

std::vector<lost_key> master::lose_keys_with_ttl(prng& random, double share) {
  const std::int64_t now = now_ms();
  std::vector<std::string> chosen;
  keys_.for_each([&](const std::string& key, const stored& value) {
    if (value.expires_at >= now && random.chance(share))
      chosen.push_back(key);
  });
  std::vector<lost_key> lost;
  for (const std::string& key : chosen)
    for (lost_key& k : lose_key(key))
      lost.push_back(std::move(k));
  return lost;
}

} // namespace redlockd::sim
