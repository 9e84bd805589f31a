#include "redlockd/resp/resp.hpp"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace redlockd {

namespace {

// "<marker><n>\r\n", as hiredis' formatter writes the count of an array and the length of a
// bulk string.
void append_header(std::string& out, char marker, std::size_t n) {
  char text[24];
  text[0] = marker;
  const auto end = std::to_chars(text + 1, text + sizeof text - 2, n).ptr;
  end[0] = '\r';
  end[1] = '\n';
  out.append(text, static_cast<std::size_t>(end + 2 - text));
}

std::size_t decimal_digits(std::size_t n) {
  std::size_t digits = 1;
  for (; n >= 10; n /= 10)
    ++digits;
  return digits;
}

} // namespace

void append_command(std::string& out, std::initializer_list<std::string_view> args) {
  constexpr std::size_t max_args = 17; // the longest: EVALSHA of hand_over
  if (args.size() > max_args)
    throw std::logic_error("append_command: too many arguments");
  append_command(out, std::span<const std::string_view>(args.begin(), args.size()));
}

void append_command(std::string& out, std::span<const std::string_view> args) {
  // The bytes redisFormatCommandArgv produces, written in place: no buffer of its own to
  // allocate, no printf per argument.
  std::size_t total = 1 + decimal_digits(args.size()) + 2;
  for (std::string_view arg : args)
    total += 1 + decimal_digits(arg.size()) + 2 + arg.size() + 2;
  out.reserve(out.size() + total);
  append_header(out, '*', args.size());
  for (std::string_view arg : args) {
    append_header(out, '$', arg.size());
    out.append(arg).append("\r\n", 2);
  }
}

void reply_deleter::operator()(redisReply* reply) const {
  reply_arena::release(reply); // the root is the first object of its block
}

namespace {

// The objects live in the arena and go with their reply, never one by one.
void free_nothing(void*) {}

} // namespace

redisReply* reply_reader::make_object(int type, std::size_t objects) {
  if (objects > max_reply_objects - objects_)
    return nullptr;
  objects_ += objects;
  auto* reply = static_cast<redisReply*>(arena_.allocate(sizeof(redisReply)));
  if (reply == nullptr)
    return nullptr;
  *reply = redisReply{};
  reply->type = type;
  return reply;
}

namespace {

// As hiredis' own constructors do: the new object takes its slot in the array it belongs to.
void* linked(const redisReadTask* task, redisReply* reply) {
  if (reply != nullptr && task->parent != nullptr)
    static_cast<redisReply*>(task->parent->obj)->element[task->idx] = reply;
  return reply;
}

reply_reader& reader_of(const redisReadTask* task) {
  return *static_cast<reply_reader*>(task->privdata);
}

} // namespace

void* reply_reader::make_string(const redisReadTask* task, char* text, std::size_t length) {
  reply_reader& self = reader_of(task);
  redisReply* reply = self.make_object(task->type, 1); // string, status or error
  if (reply == nullptr)
    return nullptr;
  auto* copy = static_cast<char*>(self.arena_.allocate(length + 1));
  if (copy == nullptr)
    return nullptr;
  std::memcpy(copy, text, length);
  copy[length] = '\0';
  reply->str = copy;
  reply->len = length;
  return linked(task, reply);
}

void* reply_reader::make_array(const redisReadTask* task, int elements) {
  // The element slots are taken at once, before a single element has arrived.
  if (elements < 0)
    return nullptr;
  reply_reader& self = reader_of(task);
  const auto count = static_cast<std::size_t>(elements);
  redisReply* reply = self.make_object(REDIS_REPLY_ARRAY, 1 + count);
  if (reply == nullptr)
    return nullptr;
  if (count > 0) {
    auto* slots = static_cast<redisReply**>(self.arena_.allocate(count * sizeof(redisReply*)));
    if (slots == nullptr)
      return nullptr;
    std::fill_n(slots, count, nullptr);
    reply->element = slots;
  }
  reply->elements = count;
  return linked(task, reply);
}

void* reply_reader::make_integer(const redisReadTask* task, long long value) {
  redisReply* reply = reader_of(task).make_object(REDIS_REPLY_INTEGER, 1);
  if (reply == nullptr)
    return nullptr;
  reply->integer = value;
  return linked(task, reply);
}

void* reply_reader::make_nil(const redisReadTask* task) {
  return linked(task, reader_of(task).make_object(REDIS_REPLY_NIL, 1));
}

reply_reader::reply_reader() {
  create();
}

void reply_reader::create() {
  static redisReplyObjectFunctions functions = {make_string, make_array, make_integer, make_nil,
                                                free_nothing};
  reader_ = redisReaderCreateWithFunctions(&functions); // hiredis never writes to it
  if (reader_ == nullptr)
    throw std::bad_alloc();
  reader_->privdata = this;
  arena_.discard();
  objects_ = 0;
  too_large_ = false;
}

reply_reader::~reply_reader() {
  redisReaderFree(reader_);
}

void reply_reader::feed(std::string_view bytes) {
  if (too_large_ || reader_->err != 0)
    return; // broken already: next() says so
  // Callers take every complete reply after each feed, so what is left is one partial reply.
  if (reader_->len - reader_->pos + bytes.size() > max_reply_bytes) {
    too_large_ = true;
    return;
  }
  if (redisReaderFeed(reader_, bytes.data(), bytes.size()) != REDIS_OK)
    throw std::bad_alloc();
}

reply_reader::status reply_reader::next(reply_ptr& out) {
  if (too_large_)
    return status::protocol_error;
  void* reply = nullptr;
  if (redisReaderGetReply(reader_, &reply) != REDIS_OK)
    return status::protocol_error;
  if (reply == nullptr)
    return status::need_more;
  objects_ = 0; // the next reply starts its own count
  // The root was the reply's first object: it takes the block, and the next reply a new one.
  void* block = arena_.finish();
  if (block != reply)
    throw std::logic_error("reply_reader: a reply that is not its block's first object");
  out.reset(static_cast<redisReply*>(reply));
  return status::reply;
}

void reply_reader::reset() {
  redisReaderFree(reader_);
  reader_ = nullptr;
  create(); // and the objects of a partial reply go
}

bool is_error(const redisReply& reply) {
  return reply.type == REDIS_REPLY_ERROR;
}

bool is_nil(const redisReply& reply) {
  return reply.type == REDIS_REPLY_NIL;
}

std::string_view as_string(const redisReply& reply) {
  switch (reply.type) {
  case REDIS_REPLY_STRING:
  case REDIS_REPLY_STATUS:
  case REDIS_REPLY_ERROR:
    return {reply.str, reply.len};
  default:
    return {};
  }
}

std::optional<std::int64_t> as_integer(const redisReply& reply) {
  if (reply.type != REDIS_REPLY_INTEGER)
    return std::nullopt;
  return static_cast<std::int64_t>(reply.integer);
}

std::size_t array_size(const redisReply& reply) {
  return reply.type == REDIS_REPLY_ARRAY ? reply.elements : 0;
}

const redisReply& array_at(const redisReply& reply, std::size_t index) {
  return *reply.element[index];
}

bool parse_counter(const char* text, std::size_t length, std::uint64_t& value) {
  if (length == 0) {
    value = 0;
    return true;
  }
  for (std::size_t i = 0; i < length; ++i)
    if (text[i] < '0' || text[i] > '9')
      return false;
  const auto [end, ec] = std::from_chars(text, text + length, value);
  return ec == std::errc{} && end == text + length;
}

} // namespace redlockd
