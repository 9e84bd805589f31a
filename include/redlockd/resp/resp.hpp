// RESP2 codec: commands written in place (the bytes hiredis' formatter would write) and hiredis'
// reply reader building each reply into one arena block (reply_arena.hpp). No I/O.
#pragma once

#include "redlockd/resp/reply_arena.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

struct redisReader;
struct redisReadTask;
struct redisReply;

namespace redlockd {

// Appends one command in RESP (as redisFormatCommandArgv produces it) to `out`.
void append_command(std::string& out, std::initializer_list<std::string_view> args);
// The same for a command whose length is known only at run time (a set's member keys).
void append_command(std::string& out, std::span<const std::string_view> args);

// A reply owns the memory of its whole tree (see reply_arena.hpp); it outlives its reader.
struct reply_deleter {
  void operator()(redisReply* reply) const;
};
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

// Bounds on one reply, far above anything the daemon asks a master for (INFO is a few KiB).
// Beyond either the stream counts as broken: hiredis alone would allocate 16 GiB for the nine
// bytes "*2147483647" and buffer any bulk string whole, however long it claims to be.
inline constexpr std::size_t max_reply_bytes = 4 << 20; // not yet parsed, incl. a partial reply
inline constexpr std::size_t max_reply_objects = 65536; // strings, integers, nils and array slots

// Incremental reply parser: feed bytes as they come, take complete replies. hiredis parses;
// the reply objects are built into a reply_arena rather than allocated one by one.
class reply_reader {
 public:
  reply_reader();
  ~reply_reader();
  reply_reader(const reply_reader&) = delete;
  reply_reader& operator=(const reply_reader&) = delete;

  enum class status : std::uint8_t { reply, need_more, protocol_error };

  void feed(std::string_view bytes);
  // reply: `out` holds the next reply. need_more: wait for bytes. protocol_error: the stream
  // is broken (or a reply exceeds the bounds above) and the connection must be dropped.
  status next(reply_ptr& out);
  // Drops everything buffered (after a reconnect).
  void reset();

 private:
  void create();
  // hiredis' reply constructors (redisReplyObjectFunctions), through the task's privdata.
  static void* make_string(const redisReadTask* task, char* text, std::size_t length);
  static void* make_array(const redisReadTask* task, int elements);
  static void* make_integer(const redisReadTask* task, long long value);
  static void* make_nil(const redisReadTask* task);
  // A zeroed object of `type` in the arena, counted as `objects` against max_reply_objects. Null
  // past the bound or out of memory: hiredis then fails the stream.
  redisReply* make_object(int type, std::size_t objects);

  redisReader* reader_ = nullptr;
  reply_arena arena_;       // the objects of the reply being parsed
  std::size_t objects_ = 0; // how many: counted against max_reply_objects
  bool too_large_ = false;  // a reply outgrew max_reply_bytes: next() reports protocol_error
};

// Reply inspection helpers.
bool is_error(const redisReply& reply);
bool is_nil(const redisReply& reply);
std::string_view as_string(const redisReply& reply); // string, status or error text; else ""
std::optional<std::int64_t> as_integer(const redisReply& reply);
std::size_t array_size(const redisReply& reply); // 0 if not an array
const redisReply& array_at(const redisReply& reply, std::size_t index);

// Parses a counter as the scripts return it (decimal string, "" or nil meaning 0).
// Returns false on anything that is not a plain uint64.
bool parse_counter(const char* text, std::size_t length, std::uint64_t& value);

} // namespace redlockd
