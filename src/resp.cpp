#include "redlockd/resp.hpp"

#include <hiredis/hiredis.h>

#include <cstdlib>
#include <stdexcept>
#include <vector>

namespace redlockd {

void append_command(std::string& out, std::initializer_list<std::string_view> args) {
  constexpr std::size_t max_args = 8;
  const char* argv[max_args];
  std::size_t argvlen[max_args];
  std::size_t argc = 0;
  for (std::string_view arg : args) {
    if (argc == max_args)
      throw std::logic_error("append_command: too many arguments");
    argv[argc] = arg.data();
    argvlen[argc] = arg.size();
    ++argc;
  }
  char* formatted = nullptr;
  const int length = redisFormatCommandArgv(&formatted, static_cast<int>(argc), argv, argvlen);
  if (length < 0)
    throw std::bad_alloc();
  out.append(formatted, static_cast<std::size_t>(length));
  redisFreeCommand(formatted);
}

void reply_deleter::operator()(redisReply* reply) const {
  freeReplyObject(reply);
}

reply_reader::reply_reader() : reader_(redisReaderCreate()) {
  if (reader_ == nullptr)
    throw std::bad_alloc();
}

reply_reader::~reply_reader() {
  redisReaderFree(reader_);
}

void reply_reader::feed(std::string_view bytes) {
  if (redisReaderFeed(reader_, bytes.data(), bytes.size()) != REDIS_OK)
    throw std::bad_alloc();
}

reply_reader::status reply_reader::next(reply_ptr& out) {
  void* reply = nullptr;
  if (redisReaderGetReply(reader_, &reply) != REDIS_OK)
    return status::protocol_error;
  if (reply == nullptr)
    return status::need_more;
  out.reset(static_cast<redisReply*>(reply));
  return status::reply;
}

void reply_reader::reset() {
  redisReaderFree(reader_);
  reader_ = redisReaderCreate();
  if (reader_ == nullptr)
    throw std::bad_alloc();
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

} // namespace redlockd
