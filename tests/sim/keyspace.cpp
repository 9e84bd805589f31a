#include "keyspace.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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
    } else if ((equals_nocase(option, "px") || equals_nocase(option, "ex") ||
                equals_nocase(option, "pxat")) &&
               !ttl_ms && !keep_ttl && i + 1 < argv.size()) {
      const bool at = equals_nocase(option, "pxat");
      const auto amount = integer_of(argv[++i]);
      if (!amount) {
        not_integer(out);
        return;
      }
      if (*amount <= 0) {
        out.error("ERR invalid expire time in 'set' command");
        return;
      }
      // (PXAT: a time on the master's clock; one already past leaves the key expired.)
      ttl_ms = at ? *amount - ctx.now_ms : equals_nocase(option, "ex") ? *amount * 1000 : *amount;
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
  value.kind = stored::type::string; // SET replaces a value of any type
  value.fields.clear();
  value.members.clear();
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
// Sorted sets, as Redis 7.0 (t_zset.c) parses, orders and answers them

// Redis 7.0 creates a set as a listpack unless its first member is longer than 64 bytes, and
// turns it into a skiplist for good when a 129th member or a longer one comes
// (zset-max-listpack-entries and -value). Nothing a client sees tells them apart but one
// thing: a listpack keeps a score of -0 as the integer 0, a skiplist keeps -0.
constexpr std::size_t listpack_max_entries = 128;
constexpr std::size_t listpack_max_member = 64;

void not_float(reply_writer& out) {
  out.error("ERR value is not a valid float");
}
void bad_range(reply_writer& out) {
  out.error("ERR min or max is not a float");
}
void syntax_error(reply_writer& out) {
  out.error("ERR syntax error");
}
// What Redis has and the model leaves out answers loudly instead of differently.
void not_modelled(reply_writer& out, std::string_view what) {
  out.error("ERR redlockd-sim does not model " + std::string(what));
}

// A score as ZADD reads it (getDoubleFromObject): strtod over the whole text, no leading space,
// no NaN, no overflow or underflow to zero; "inf", "-inf" and "+inf" are scores.
std::optional<double> score_of(std::string_view text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text.front())) != 0)
    return std::nullopt;
  const std::string copy(text);
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size() || std::isnan(value) ||
      (errno == ERANGE && (value == HUGE_VAL || value == -HUGE_VAL || value == 0)))
    return std::nullopt;
  return value;
}

// A score interval as ZCOUNT, ZRANGEBYSCORE and ZREMRANGEBYSCORE read it (zslParseRange): each
// bound is strtod up to the end of the C string, exclusive when prefixed with '('.
struct score_range {
  double min = 0;
  double max = 0;
  bool min_exclusive = false;
  bool max_exclusive = false;

  bool above_min(double score) const { return min_exclusive ? score > min : score >= min; }
  bool below_max(double score) const { return max_exclusive ? score < max : score <= max; }
};

bool bound_of(std::string_view text, double& value, bool& exclusive) {
  const std::string copy(text);
  const char* from = copy.c_str();
  exclusive = *from == '(';
  if (exclusive)
    ++from;
  char* end = nullptr;
  value = std::strtod(from, &end);
  return *end == '\0' && !std::isnan(value);
}

std::optional<score_range> range_of(std::string_view min, std::string_view max) {
  score_range range;
  if (!bound_of(min, range.min, range.min_exclusive) ||
      !bound_of(max, range.max, range.max_exclusive))
    return std::nullopt;
  return range;
}

// A score as Redis replies it in RESP2 (addReplyDouble): "inf", "-inf", else %.17g.
void score_reply(double score, reply_writer& out) {
  if (std::isinf(score)) {
    out.bulk(score > 0 ? "inf" : "-inf");
    return;
  }
  char text[32];
  const int size = std::snprintf(text, sizeof text, "%.17g", score);
  out.bulk({text, static_cast<std::size_t>(size)});
}

// A sorted set of `key`, or nullptr; `wrong` is set when the key holds another type.
stored* zset_at(command_context& ctx, std::string_view key, bool& wrong) {
  stored* value = ctx.keys.find(key, ctx.now_ms);
  wrong = value != nullptr && value->kind != stored::type::zset;
  return wrong ? nullptr : value;
}

std::vector<zset_entry>::iterator member_of(stored& set, std::string_view member) {
  return std::find_if(set.members.begin(), set.members.end(),
                      [&](const zset_entry& e) { return e.member == member; });
}

void insert_member(stored& set, double score, std::string_view member) {
  if (set.listpack && score == 0)
    score = 0; // -0 too: a listpack stores an integral score as an integer
  const auto at = std::lower_bound(
      set.members.begin(), set.members.end(), std::pair{score, member},
      [](const zset_entry& e, const std::pair<double, std::string_view>& p) {
        return e.score < p.first || (e.score == p.first && std::string_view(e.member) < p.second);
      });
  set.members.insert(at, zset_entry{score, std::string(member)});
}

// ZADD key [NX|XX] [GT|LT] [CH] score member [score member ...] (INCR is not modelled)
void cmd_zadd(command_context& ctx, std::span<const std::string_view> argv, reply_writer& out) {
  bool nx = false;
  bool xx = false;
  bool gt = false;
  bool lt = false;
  bool ch = false;
  bool incr = false;
  std::size_t first = 2; // the first score
  for (; first < argv.size(); ++first) {
    const std::string_view option = argv[first];
    if (equals_nocase(option, "nx"))
      nx = true;
    else if (equals_nocase(option, "xx"))
      xx = true;
    else if (equals_nocase(option, "ch"))
      ch = true;
    else if (equals_nocase(option, "incr"))
      incr = true;
    else if (equals_nocase(option, "gt"))
      gt = true;
    else if (equals_nocase(option, "lt"))
      lt = true;
    else
      break;
  }
  const std::size_t elements = argv.size() - first;
  if (elements == 0 || elements % 2 != 0) {
    syntax_error(out);
    return;
  }
  if (xx && nx) {
    out.error("ERR XX and NX options at the same time are not compatible");
    return;
  }
  if ((gt && nx) || (lt && nx) || (gt && lt)) {
    out.error("ERR GT, LT, and/or NX options at the same time are not compatible");
    return;
  }
  if (incr && elements > 2) {
    out.error("ERR INCR option supports a single increment-element pair");
    return;
  }
  if (incr) {
    not_modelled(out, "ZADD INCR");
    return;
  }
  // Every score is read before anything changes: the command runs whole or not at all.
  for (std::size_t i = first; i < argv.size(); i += 2)
    if (!score_of(argv[i])) {
      not_float(out);
      return;
    }
  bool wrong = false;
  stored* set = zset_at(ctx, argv[1], wrong);
  if (wrong) {
    wrong_type(out);
    return;
  }
  if (set == nullptr) {
    if (xx) {
      out.integer(0);
      return;
    }
    set = &ctx.keys.create(argv[1]);
    set->kind = stored::type::zset;
    set->listpack = argv[first + 1].size() <= listpack_max_member;
  }
  std::int64_t added = 0;
  std::int64_t updated = 0;
  for (std::size_t i = first; i < argv.size(); i += 2) {
    const double score = *score_of(argv[i]);
    const std::string_view member = argv[i + 1];
    if (const auto it = member_of(*set, member); it != set->members.end()) {
      if (nx || (lt && score >= it->score) || (gt && score <= it->score) || score == it->score)
        continue;
      set->members.erase(it);
      insert_member(*set, score, member);
      ++updated;
    } else if (!xx) {
      if (set->members.size() + 1 > listpack_max_entries || member.size() > listpack_max_member)
        set->listpack = false;
      insert_member(*set, score, member);
      ++added;
    }
  }
  out.integer(ch ? added + updated : added);
}

void cmd_zrem(command_context& ctx, std::span<const std::string_view> argv, reply_writer& out) {
  bool wrong = false;
  stored* set = zset_at(ctx, argv[1], wrong);
  if (wrong) {
    wrong_type(out);
    return;
  }
  std::int64_t removed = 0;
  for (std::size_t i = 2; set != nullptr && i < argv.size(); ++i) {
    if (const auto it = member_of(*set, argv[i]); it != set->members.end()) {
      set->members.erase(it);
      ++removed;
    }
    if (set->members.empty()) {
      ctx.keys.erase(argv[1]); // Redis deletes an emptied set
      set = nullptr;
    }
  }
  out.integer(removed);
}

void cmd_zcard(command_context& ctx, std::span<const std::string_view> argv, reply_writer& out) {
  bool wrong = false;
  const stored* set = zset_at(ctx, argv[1], wrong);
  if (wrong)
    wrong_type(out);
  else
    out.integer(set ? static_cast<std::int64_t>(set->members.size()) : 0);
}

void cmd_zscore(command_context& ctx, std::span<const std::string_view> argv, reply_writer& out) {
  bool wrong = false;
  stored* set = zset_at(ctx, argv[1], wrong);
  if (wrong) {
    wrong_type(out);
    return;
  }
  if (set == nullptr) {
    out.nil();
    return;
  }
  if (const auto it = member_of(*set, argv[2]); it != set->members.end())
    score_reply(it->score, out);
  else
    out.nil();
}

void cmd_zcount(command_context& ctx, std::span<const std::string_view> argv, reply_writer& out) {
  const auto range = range_of(argv[2], argv[3]);
  if (!range) {
    bad_range(out);
    return;
  }
  bool wrong = false;
  const stored* set = zset_at(ctx, argv[1], wrong);
  if (wrong) {
    wrong_type(out);
    return;
  }
  std::int64_t count = 0;
  if (set != nullptr)
    for (const zset_entry& e : set->members)
      if (range->above_min(e.score) && range->below_max(e.score))
        ++count;
  out.integer(count);
}

void cmd_zremrangebyscore(command_context& ctx, std::span<const std::string_view> argv,
                          reply_writer& out) {
  const auto range = range_of(argv[2], argv[3]);
  if (!range) {
    bad_range(out);
    return;
  }
  bool wrong = false;
  stored* set = zset_at(ctx, argv[1], wrong);
  if (wrong) {
    wrong_type(out);
    return;
  }
  std::int64_t removed = 0;
  if (set != nullptr) {
    removed = static_cast<std::int64_t>(std::erase_if(set->members, [&](const zset_entry& e) {
      return range->above_min(e.score) && range->below_max(e.score);
    }));
    if (set->members.empty())
      ctx.keys.erase(argv[1]); // Redis deletes an emptied set
  }
  out.integer(removed);
}

// ZRANGE, ZREVRANGE, ZRANGEBYSCORE and ZREVRANGEBYSCORE share one parser, as in Redis 7.0
// (zrangeGenericCommand): the options first, then the range, then the key.
enum class range_by : std::uint8_t { unset, rank, score, lex };
enum class range_order : std::uint8_t { unset, forward, reverse };

void zrange(command_context& ctx, std::span<const std::string_view> argv, reply_writer& out,
            range_by by, range_order order) {
  bool with_scores = false;
  std::int64_t offset = 0;
  std::int64_t limit = -1; // Redis's "no LIMIT", so LIMIT 0 -1 counts as none
  for (std::size_t i = 4; i < argv.size(); ++i) {
    const std::string_view option = argv[i];
    if (equals_nocase(option, "withscores")) {
      with_scores = true;
    } else if (equals_nocase(option, "limit") && argv.size() - i - 1 >= 2) {
      const auto from = integer_of(argv[i + 1]);
      const auto count = integer_of(argv[i + 2]);
      if (!from || !count) {
        not_integer(out);
        return;
      }
      offset = *from;
      limit = *count;
      i += 2;
    } else if (order == range_order::unset && equals_nocase(option, "rev")) {
      order = range_order::reverse;
    } else if (by == range_by::unset && equals_nocase(option, "bylex")) {
      by = range_by::lex;
    } else if (by == range_by::unset && equals_nocase(option, "byscore")) {
      by = range_by::score;
    } else {
      syntax_error(out);
      return;
    }
  }
  if (order == range_order::unset)
    order = range_order::forward;
  if (by == range_by::unset)
    by = range_by::rank;
  if (limit != -1 && by == range_by::rank) {
    out.error("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or "
              "BYLEX");
    return;
  }
  if (with_scores && by == range_by::lex) {
    out.error("ERR syntax error, WITHSCORES not supported in combination with BYLEX");
    return;
  }
  const bool reverse = order == range_order::reverse;
  // A reversed range by score is given as max, then min.
  const std::string_view low = reverse && by != range_by::rank ? argv[3] : argv[2];
  const std::string_view high = reverse && by != range_by::rank ? argv[2] : argv[3];
  std::optional<std::int64_t> start;
  std::optional<std::int64_t> stop;
  std::optional<score_range> range;
  if (by == range_by::rank) {
    start = integer_of(low);
    stop = integer_of(high);
    if (!start || !stop) {
      not_integer(out);
      return;
    }
  } else if (by == range_by::score) {
    range = range_of(low, high);
    if (!range) {
      bad_range(out);
      return;
    }
  } else {
    not_modelled(out, "ZRANGE BYLEX");
    return;
  }
  bool wrong = false;
  const stored* set = zset_at(ctx, argv[1], wrong);
  if (wrong) {
    wrong_type(out);
    return;
  }
  if (set == nullptr) {
    out.array(0);
    return;
  }
  const auto length = static_cast<std::int64_t>(set->members.size());
  // The reply is `count` members from the `first`-th in the order asked for (0: the lowest
  // score forward, the highest reversed).
  std::int64_t first = 0;
  std::int64_t count = 0;
  if (by == range_by::rank) {
    // genericZrangebyrankCommand: negative indexes count from the end; clamped to the set.
    std::int64_t from = *start < 0 ? length + *start : *start;
    std::int64_t to = *stop < 0 ? length + *stop : *stop;
    from = std::max<std::int64_t>(from, 0);
    to = std::min(to, length - 1);
    if (from <= to && from < length) {
      first = from;
      count = to - from + 1;
    }
  } else {
    // genericZrangebyscoreCommand: the members in range, then OFFSET skipped (a negative one
    // skips everything) and at most LIMIT kept (a negative one keeps all).
    std::int64_t in_range = 0;
    std::int64_t before = 0; // members before the range, in the order asked for
    for (std::int64_t i = 0; i < length; ++i) {
      const double score =
          set->members[static_cast<std::size_t>(reverse ? length - 1 - i : i)].score;
      if (range->above_min(score) && range->below_max(score))
        ++in_range;
      else if (in_range == 0)
        ++before;
    }
    if (offset >= 0 && offset < in_range) {
      first = before + offset;
      count = limit < 0 ? in_range - offset : std::min(limit, in_range - offset);
    }
  }
  out.array(static_cast<std::size_t>(count) * (with_scores ? 2 : 1));
  for (std::int64_t i = first; i < first + count; ++i) {
    const zset_entry& e = set->members[static_cast<std::size_t>(reverse ? length - 1 - i : i)];
    out.bulk(e.member);
    if (with_scores)
      score_reply(e.score, out);
  }
}

void cmd_zrange(command_context& ctx, std::span<const std::string_view> argv, reply_writer& out) {
  zrange(ctx, argv, out, range_by::unset, range_order::unset);
}
void cmd_zrevrange(command_context& ctx, std::span<const std::string_view> argv,
                   reply_writer& out) {
  zrange(ctx, argv, out, range_by::rank, range_order::reverse);
}
void cmd_zrangebyscore(command_context& ctx, std::span<const std::string_view> argv,
                       reply_writer& out) {
  zrange(ctx, argv, out, range_by::score, range_order::forward);
}
void cmd_zrevrangebyscore(command_context& ctx, std::span<const std::string_view> argv,
                          reply_writer& out) {
  zrange(ctx, argv, out, range_by::score, range_order::reverse);
}

// ---------------------------------------------------------------------------------------------
// The table

// Looked up in order: the commands of the exclusive locks' scripts first.
constexpr command_spec commands[] = {
    {"get", 2, cmd_get},
    {"mget", -2, cmd_mget},
    {"set", -3, cmd_set},
    {"del", -2, cmd_del},
    {"exists", -2, cmd_exists},
    {"pttl", 2, cmd_pttl},
    {"pexpire", 3, cmd_pexpire},
    {"time", 1, cmd_time},
    {"publish", 3, cmd_publish},
    {"hset", -4, cmd_hset},
    {"hget", 3, cmd_hget},
    {"hdel", -3, cmd_hdel},
    {"hlen", 2, cmd_hlen},
    {"hexists", 3, cmd_hexists},
    {"hgetall", 2, cmd_hgetall},
    {"hincrby", 4, cmd_hincrby},
    {"zadd", -4, cmd_zadd},
    {"zrem", -3, cmd_zrem},
    {"zcard", 2, cmd_zcard},
    {"zscore", 3, cmd_zscore},
    {"zcount", 4, cmd_zcount},
    {"zrangebyscore", -4, cmd_zrangebyscore},
    {"zrevrangebyscore", -4, cmd_zrevrangebyscore},
    {"zremrangebyscore", 4, cmd_zremrangebyscore},
    {"zrange", -4, cmd_zrange},
    {"zrevrange", -4, cmd_zrevrange},
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
