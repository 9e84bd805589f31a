#include "redlockd/resp/resp.hpp"

#include <hiredis/hiredis.h>

#include <charconv>
#include <cstdlib>
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
  // The bytes redisFormatCommandArgv produces, written in place: no buffer of its own to
  // allocate, no printf per argument.
  constexpr std::size_t max_args = 10; // the longest: EVALSHA of the hand-over script
  if (args.size() > max_args)
    throw std::logic_error("append_command: too many arguments");
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
  freeReplyObject(reply);
}

namespace {

// hiredis's own reply constructors, each counting against max_reply_objects first (through the
// task's privdata, the reader's object count). Returning nullptr makes hiredis fail the stream.
const redisReplyObjectFunctions& hiredis_functions() {
  static const redisReplyObjectFunctions functions = [] {
    redisReader* probe = redisReaderCreate();
    if (probe == nullptr)
      throw std::bad_alloc();
    const redisReplyObjectFunctions copy = *probe->fn;
    redisReaderFree(probe);
    return copy;
  }();
  return functions;
}

bool take_objects(const redisReadTask* task, std::size_t count) {
  auto& objects = *static_cast<std::size_t*>(task->privdata);
  if (count > max_reply_objects - objects)
    return false;
  objects += count;
  return true;
}

void* bounded_string(const redisReadTask* task, char* text, std::size_t length) {
  return take_objects(task, 1) ? hiredis_functions().createString(task, text, length) : nullptr;
}

void* bounded_array(const redisReadTask* task, int elements) {
  // hiredis allocates the element slots at once, before a single element has arrived.
  if (elements < 0 || !take_objects(task, 1 + static_cast<std::size_t>(elements)))
    return nullptr;
  return hiredis_functions().createArray(task, elements);
}

void* bounded_integer(const redisReadTask* task, long long value) {
  return take_objects(task, 1) ? hiredis_functions().createInteger(task, value) : nullptr;
}

void* bounded_nil(const redisReadTask* task) {
  return take_objects(task, 1) ? hiredis_functions().createNil(task) : nullptr;
}

redisReplyObjectFunctions* bounded_functions() {
  static redisReplyObjectFunctions functions = {bounded_string, bounded_array, bounded_integer,
                                                bounded_nil, hiredis_functions().freeObject};
  return &functions; // hiredis takes it non-const but never writes to it
}

} // namespace

reply_reader::reply_reader() {
  create();
}

void reply_reader::create() {
  reader_ = redisReaderCreateWithFunctions(bounded_functions());
  if (reader_ == nullptr)
    throw std::bad_alloc();
  reader_->privdata = &objects_;
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
  out.reset(static_cast<redisReply*>(reply));
  return status::reply;
}

void reply_reader::reset() {
  redisReaderFree(reader_);
  reader_ = nullptr;
  create();
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
