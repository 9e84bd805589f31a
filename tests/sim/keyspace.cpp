#include "keyspace.hpp"

#include <algorithm>
#include <charconv>
#include <optional>

namespace redlockd::sim {
namespace {

// ---------------------------------------------------------------------------------------------
// Helpers

// Redis's string2ll: an optional '-', then digits without a leading zero (but "0"); fits int64.
std::optional<std::int64_t> integer_of(std::string_view text) {
  if (text.empty() || text.size() > 20)
    return std::nullopt;
  const bool negative = text.front() == '-';
  const std::string_view digits = negative ? text.substr(1) : text;
  if (digits.empty() || (digits.front() == '0' && digits.size() > 1) || (negative && digits == "0"))
    return std::nullopt;
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size())
    return std::nullopt;
  return value;
}

bool equals_nocase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return (x | 0x20) == (y | 0x20);
         });
}

void wrong_type(reply_writer& out) {
  out.error("WRONGTYPE Operation against a key holding the wrong kind of value");
}
void not_integer(reply_writer& out) {
  out.error("ERR value is not an integer or out of range");
}

std::int64_t pttl_of(const stored& value, std::int64_t now_ms) {
  if (value.expires_at < 0)
    return -1;
  return std::max<std::int64_t>(0, value.expires_at - now_ms);
}

// A hash value of `key`, or nullptr; `wrong` is set when the key holds another type.
stored* hash_at(command_context& ctx, std::string_view key, bool& wrong) {
  stored* value = ctx.keys.find(key, ctx.now_ms);
  wrong = value != nullptr && value->kind != stored::type::hash;
  return wrong ? nullptr : value;
}

// The hash of `key` to write to, created if missing; nullptr (with the error written) when the
// key holds another type.
stored* hash_for_write(command_context& ctx, std::string_view key, reply_writer& out) {
  bool wrong = false;
  stored* hash = hash_at(ctx, key, wrong);
  if (wrong) {
    wrong_type(out);
    return nullptr;
  }
  if (hash == nullptr) {
    hash = &ctx.keys.create(key);
    hash->kind = stored::type::hash;
  }
  return hash;
}

std::pair<std::string, std::string>* field_of(stored& hash, std::string_view field) {
  for (auto& entry : hash.fields)
    if (entry.first == field)
      return &entry;
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Strings and keys

void cmd_get(command_context& ctx, std::span<const std::string_view> argv, reply_writer& out) {
  const stored* value = ctx.keys.find(argv[1], ctx.now_ms);
  if (value == nullptr)
    out.nil();
  else if (value->kind != stored::type::string)
    wrong_type(out);
  else
    out.bulk(value->text);
}

void cmd_mget(command_context& ctx, std::span<const std::string_view> argv, reply_writer& out) {
  out.array(argv.size() - 1);
  for (std::size_t i = 1; i < argv.size(); ++i) {
    const stored* value = ctx.keys.find(argv[i], ctx.now_ms);
    if (value == nullptr || value->kind != stored::type::string)
      out.nil();
    else
      out.bulk(value->text);
  }
}

// SET key value [NX|XX] [EX s|PX ms|KEEPTTL]
void cmd_set(command_context& ctx, std::span<const std::string_view> argv, reply_writer& out) {
  bool nx = false;
  bool xx = false;
  bool keep_ttl = false;
  std::optional<std::int64_t> ttl_ms;
  for (std::size_t i = 3; i < argv.size(); ++i) {
    const std::string_view option = argv[i];
    if (equals_nocase(option, "nx") && !xx) {
      nx = true;
    } else if (equals_nocase(option, "xx") && !nx) {
      xx = true;
    } else if (equals_nocase(option, "keepttl") && !ttl_ms) {
      keep_ttl = true;
    } else if ((equals_nocase(option, "px") || equals_nocase(option, "ex")) && !ttl_ms &&
               !keep_ttl && i + 1 < argv.size()) {
      const auto amount = integer_of(argv[++i]);
      if (!amount) {
        not_integer(out);
        return;
      }
      if (*amount <= 0) {
        out.error("ERR invalid expire time in 'set' command");
        return;
      }
      ttl_ms = equals_nocase(option, "ex") ? *amount * 1000 : *amount;
    } else {
      out.error("ERR syntax error");
      return;
    }
  }
  stored* existing = ctx.keys.find(argv[1], ctx.now_ms);
  if ((nx && existing != nullptr) || (xx && existing == nullptr)) {
    out.nil();
    return;
  }
  const std::int64_t kept = keep_ttl && existing != nullptr ? existing->expires_at : -1;
  stored& value = existing != nullptr ? *existing : ctx.keys.create(argv[1]);
  value.kind = stored::type::string;
  value.fields.clear();
  value.text.assign(argv[2]);
  value.expires_at = ttl_ms ? ctx.now_ms + *ttl_ms : kept;
  out.status("OK");
}

void cmd_del(command_context& ctx, std::span<const std::string_view> argv, reply_writer& out) {
  std::int64_t deleted = 0;
  for (std::size_t i = 1; i < argv.size(); ++i)
    if (ctx.keys.find(argv[i], ctx.now_ms) != nullptr && ctx.keys.erase(argv[i]))
      ++deleted;
  out.integer(deleted);
}

void cmd_exists(command_context& ctx, std::span<const std::string_view> argv, reply_writer& out) {
  std::int64_t found = 0;
  for (std::size_t i = 1; i < argv.size(); ++i)
    if (ctx.keys.find(argv[i], ctx.now_ms) != nullptr)
      ++found;
  out.integer(found);
}

void cmd_pttl(command_context& ctx, std::span<const std::string_view> argv, reply_writer& out) {
  const stored* value = ctx.keys.find(argv[1], ctx.now_ms);
  out.integer(value == nullptr ? -2 : pttl_of(*value, ctx.now_ms));
}

void cmd_pexpire(command_context& ctx, std::span<const std::string_view> argv, reply_writer& out) {
  const auto amount = integer_of(argv[2]);
  if (!amount) {
    not_integer(out);
    return;
  }
  stored* value = ctx.keys.find(argv[1], ctx.now_ms);
  if (value == nullptr) {
    out.integer(0);
    return;
  }
  if (*amount <= 0)
    ctx.keys.erase(argv[1]); // an expiry in the past deletes the key
  else
    value->expires_at = ctx.now_ms + *amount;
  out.integer(1);
}

void cmd_time(command_context& ctx, std::span<const std::string_view>, reply_writer& out) {
  char seconds[24];
  char micros[24];
  const auto s_end = std::to_chars(seconds, seconds + sizeof seconds, ctx.now_us / 1'000'000).ptr;
  const auto us_end = std::to_chars(micros, micros + sizeof micros, ctx.now_us % 1'000'000).ptr;
  out.array(2);
  out.bulk({seconds, static_cast<std::size_t>(s_end - seconds)});
  out.bulk({micros, static_cast<std::size_t>(us_end - micros)});
}

void cmd_publish(command_context& ctx, std::span<const std::string_view> argv, reply_writer& out) {
  out.integer(ctx.subscribers.publish(argv[1], argv[2]));
}

// ---------------------------------------------------------------------------------------------
// Hashes

void cmd_hset(command_context& ctx, std::span<const std::string_view> argv, reply_writer& out) {
  if (argv.size() % 2 != 0) {
    out.error("ERR wrong number of arguments for 'hset' command");
    return;
  }
  stored* hash = hash_for_write(ctx, argv[1], out);
  if (hash == nullptr)
    return;
  std::int64_t added = 0;
  for (std::size_t i = 2; i + 1 < argv.size(); i += 2) {
    if (auto* entry = field_of(*hash, argv[i])) {
      entry->second.assign(argv[i + 1]);
    } else {
      hash->fields.emplace_back(argv[i], argv[i + 1]);
      ++added;
    }
  }
  out.integer(added);
}

void cmd_hget(command_context& ctx, std::span<const std::string_view> argv, reply_writer& out) {
  bool wrong = false;
  stored* hash = hash_at(ctx, argv[1], wrong);
  if (wrong)
    wrong_type(out);
  else if (const auto* entry = hash ? field_of(*hash, argv[2]) : nullptr)
    out.bulk(entry->second);
  else
    out.nil();
}

void cmd_hdel(command_context& ctx, std::span<const std::string_view> argv, reply_writer& out) {
  bool wrong = false;
  stored* hash = hash_at(ctx, argv[1], wrong);
  if (wrong) {
    wrong_type(out);
    return;
  }
  std::int64_t removed = 0;
  if (hash != nullptr) {
    for (std::size_t i = 2; i < argv.size(); ++i)
      removed += std::erase_if(hash->fields, [&](const auto& e) { return e.first == argv[i]; });
    if (hash->fields.empty())
      ctx.keys.erase(argv[1]); // Redis deletes an emptied hash
  }
  out.integer(removed);
}

void cmd_hlen(command_context& ctx, std::span<const std::string_view> argv, reply_writer& out) {
  bool wrong = false;
  const stored* hash = hash_at(ctx, argv[1], wrong);
  if (wrong)
    wrong_type(out);
  else
    out.integer(hash ? static_cast<std::int64_t>(hash->fields.size()) : 0);
}

void cmd_hexists(command_context& ctx, std::span<const std::string_view> argv, reply_writer& out) {
  bool wrong = false;
  stored* hash = hash_at(ctx, argv[1], wrong);
  if (wrong)
    wrong_type(out);
  else
    out.integer(hash && field_of(*hash, argv[2]) ? 1 : 0);
}

void cmd_hgetall(command_context& ctx, std::span<const std::string_view> argv, reply_writer& out) {
  bool wrong = false;
  const stored* hash = hash_at(ctx, argv[1], wrong);
  if (wrong) {
    wrong_type(out);
    return;
  }
  if (hash == nullptr) {
    out.array(0);
    return;
  }
  out.array(hash->fields.size() * 2);
  for (const auto& [field, value] : hash->fields) {
    out.bulk(field);
    out.bulk(value);
  }
}

void cmd_hincrby(command_context& ctx, std::span<const std::string_view> argv, reply_writer& out) {
  const auto by = integer_of(argv[3]);
  if (!by) {
    not_integer(out);
    return;
  }
  stored* hash = hash_for_write(ctx, argv[1], out);
  if (hash == nullptr)
    return;
  auto* entry = field_of(*hash, argv[2]);
  std::int64_t value = 0;
  if (entry != nullptr) {
    const auto current = integer_of(entry->second);
    if (!current) {
      out.error("ERR hash value is not an integer");
      return;
    }
    value = *current;
  }
  value += *by;
  const std::string text = std::to_string(value);
  if (entry != nullptr)
    entry->second = text;
  else
    hash->fields.emplace_back(std::string(argv[2]), text);
  out.integer(value);
}

// ---------------------------------------------------------------------------------------------
// The table

constexpr command_spec commands[] = {
    {"get", 2, cmd_get},         {"mget", -2, cmd_mget},      {"set", -3, cmd_set},
    {"del", -2, cmd_del},        {"exists", -2, cmd_exists},  {"pttl", 2, cmd_pttl},
    {"pexpire", 3, cmd_pexpire}, {"time", 1, cmd_time},       {"publish", 3, cmd_publish},
    {"hset", -4, cmd_hset},      {"hget", 3, cmd_hget},       {"hdel", -3, cmd_hdel},
    {"hlen", 2, cmd_hlen},       {"hexists", 3, cmd_hexists}, {"hgetall", 2, cmd_hgetall},
    {"hincrby", 4, cmd_hincrby},
};

} // namespace

// ---------------------------------------------------------------------------------------------
// resp_writer

void resp_writer::integer(std::int64_t value) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  out_.push_back(':');
  out_.append(digits, end);
  out_.append("\r\n");
}

void resp_writer::bulk(std::string_view text) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, text.size()).ptr;
  out_.push_back('$');
  out_.append(digits, end);
  out_.append("\r\n");
  out_.append(text);
  out_.append("\r\n");
}

void resp_writer::status(std::string_view text) {
  out_.push_back('+');
  out_.append(text);
  out_.append("\r\n");
}

void resp_writer::error(std::string_view text) {
  out_.push_back('-');
  out_.append(text);
  out_.append("\r\n");
}

void resp_writer::array(std::size_t elements) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, elements).ptr;
  out_.push_back('*');
  out_.append(digits, end);
  out_.append("\r\n");
}

// ---------------------------------------------------------------------------------------------
// keyspace

stored* keyspace::find(std::string_view key, std::int64_t now_ms) {
  const auto it = map_.find(key);
  if (it == map_.end())
    return nullptr;
  if (it->second.expires_at >= 0 && now_ms > it->second.expires_at) {
    map_.erase(it);
    return nullptr;
  }
  return &it->second;
}

stored& keyspace::create(std::string_view key) {
  const auto it = map_.find(key);
  if (it != map_.end()) {
    it->second = stored{};
    return it->second;
  }
  return map_.emplace(std::string(key), stored{}).first->second;
}

void keyspace::sweep(std::int64_t now_ms) {
  if (map_.size() < sweep_at_)
    return;
  std::erase_if(map_, [&](const auto& entry) {
    return entry.second.expires_at >= 0 && now_ms > entry.second.expires_at;
  });
  sweep_at_ = std::max<std::size_t>(4096, 2 * map_.size());
}

const command_spec* find_command(std::string_view name) {
  for (const command_spec& spec : commands)
    if (equals_nocase(spec.name, name))
      return &spec;
  return nullptr;
}

void run_command(command_context& ctx, std::span<const std::string_view> argv, reply_writer& out) {
  const command_spec* spec = find_command(argv[0]);
  if (spec == nullptr) {
    out.error("ERR unknown command '" + std::string(argv[0]) + "'");
    return;
  }
  const auto given = static_cast<int>(argv.size());
  if ((spec->arity > 0 && given != spec->arity) || (spec->arity < 0 && given < -spec->arity)) {
    out.error("ERR wrong number of arguments for '" + std::string(spec->name) + "' command");
    return;
  }
  spec->run(ctx, argv, out);
}

} // namespace redlockd::sim
