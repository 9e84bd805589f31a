// RESP2 codec on top of hiredis: its command formatter and its reply reader. No I/O.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

struct redisReader;
struct redisReply;

namespace redlockd {

// Appends one command in RESP (as redisFormatCommandArgv produces it) to `out`.
void append_command(std::string& out, std::initializer_list<std::string_view> args);

struct reply_deleter {
  void operator()(redisReply* reply) const;
};
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

// Incremental reply parser: feed bytes as they come, take complete replies.
class reply_reader {
 public:
  reply_reader();
  ~reply_reader();
  reply_reader(const reply_reader&) = delete;
  reply_reader& operator=(const reply_reader&) = delete;

  enum class status : std::uint8_t { reply, need_more, protocol_error };

  void feed(std::string_view bytes);
  // reply: `out` holds the next reply. need_more: wait for bytes. protocol_error: the stream
  // is broken and the connection must be dropped.
  status next(reply_ptr& out);
  // Drops everything buffered (after a reconnect).
  void reset();

 private:
  redisReader* reader_ = nullptr;
};

// Reply inspection helpers.
bool is_error(const redisReply& reply);
bool is_nil(const redisReply& reply);
std::string_view as_string(const redisReply& reply); // string, status or error text; else ""
std::optional<std::int64_t> as_integer(const redisReply& reply);
std::size_t array_size(const redisReply& reply); // 0 if not an array
const redisReply& array_at(const redisReply& reply, std::size_t index);

} // namespace redlockd
