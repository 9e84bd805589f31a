// Fuzzes the RESP codec on top of hiredis: bytes a master might send are fed to reply_reader
// at once and in small chunks, which must give the same replies and the same end; every reply
// is walked with the inspection helpers. Commands built by append_command from the input must
// read back as the array of their arguments.
//
// Input: byte 0 seeds the chunk sizes; the rest is both the RESP stream and, read as
// length-prefixed strings, up to 8 command arguments.
#include "redlockd/resp/resp.hpp"

#include <hiredis/hiredis.h>

#include <string>
#include <vector>

#include "fuzz_input.hpp"

namespace {

using namespace redlockd;
using redlockd::fuzz::require;

// A reply as text, through the helpers the daemon uses; equal trees give equal text.
std::string describe(const redisReply& reply) {
  std::string out;
  if (is_nil(reply))
    return "nil";
  if (const auto n = as_integer(reply))
    return "int:" + std::to_string(*n);
  if (reply.type == REDIS_REPLY_ARRAY) {
    out = "array" + std::to_string(array_size(reply)) + "[";
    for (std::size_t i = 0; i < array_size(reply); ++i)
      out += describe(array_at(reply, i)) + ",";
    return out + "]";
  }
  const std::string_view text = as_string(reply);
  require(reply.type == REDIS_REPLY_STRING || reply.type == REDIS_REPLY_STATUS ||
              reply.type == REDIS_REPLY_ERROR,
          "a reply of an unknown type");
  require(is_error(reply) == (reply.type == REDIS_REPLY_ERROR), "is_error disagrees with type");
  return std::to_string(reply.type) + ":" + std::to_string(text.size()) + ":" + std::string(text);
}

struct read_result {
  std::vector<std::string> replies;
  bool protocol_error = false;
};

bool drain(reply_reader& reader, read_result& out) {
  for (;;) {
    reply_ptr reply;
    const auto status = reader.next(reply);
    if (status == reply_reader::status::need_more)
      return true;
    if (status == reply_reader::status::protocol_error) {
      out.protocol_error = true;
      return false;
    }
    require(reply != nullptr, "status reply without a reply");
    out.replies.push_back(describe(*reply));
  }
}

read_result read_all(reply_reader& reader, std::string_view stream, fuzz::chunker* chunks) {
  read_result out;
  std::size_t fed = 0;
  while (fed < stream.size()) {
    const std::size_t n = chunks ? chunks->next(stream.size() - fed) : stream.size();
    reader.feed(stream.substr(fed, n));
    fed += n;
    if (!drain(reader, out))
      break;
  }
  return out;
}

// Up to 8 arguments, each a length byte (mod 48) and that many bytes.
std::vector<std::string> take_arguments(std::string_view input) {
  std::vector<std::string> args;
  while (!input.empty() && args.size() < 8) {
    const std::size_t length = static_cast<unsigned char>(input[0]) % 48;
    input.remove_prefix(1);
    args.emplace_back(input.substr(0, length));
    input.remove_prefix(std::min(length, input.size()));
  }
  return args;
}

std::string format(const std::vector<std::string>& args) {
  std::string out;
  switch (args.size()) {
  case 0:
    append_command(out, {});
    break;
  case 1:
    append_command(out, {args[0]});
    break;
  case 2:
    append_command(out, {args[0], args[1]});
    break;
  case 3:
    append_command(out, {args[0], args[1], args[2]});
    break;
  case 4:
    append_command(out, {args[0], args[1], args[2], args[3]});
    break;
  case 5:
    append_command(out, {args[0], args[1], args[2], args[3], args[4]});
    break;
  case 6:
    append_command(out, {args[0], args[1], args[2], args[3], args[4], args[5]});
    break;
  case 7:
    append_command(out, {args[0], args[1], args[2], args[3], args[4], args[5], args[6]});
    break;
  default:
    append_command(out, {args[0], args[1], args[2], args[3], args[4], args[5], args[6], args[7]});
    break;
  }
  return out;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1)
    return 0;
  const std::uint8_t seed = data[0];
  const std::string_view stream = fuzz::as_text(data + 1, size - 1);

  reply_reader whole_reader;
  const read_result whole = read_all(whole_reader, stream, nullptr);
  reply_reader chunked_reader;
  fuzz::chunker chunks(seed);
  const read_result chunked = read_all(chunked_reader, stream, &chunks);
  require(whole.replies == chunked.replies, "replies differ when the bytes come in chunks");
  require(whole.protocol_error == chunked.protocol_error,
          "a protocol error depends on how the bytes come");

  // After reset() a reader starts clean, whatever it held.
  chunked_reader.reset();
  const std::vector<std::string> args = take_arguments(stream);
  const std::string command = format(args);
  fuzz::chunker command_chunks(static_cast<std::uint8_t>(seed + 1));
  const read_result echoed = read_all(chunked_reader, command, &command_chunks);
  require(!echoed.protocol_error && echoed.replies.size() == 1,
          "a formatted command does not read back as one reply");
  std::string expected = "array" + std::to_string(args.size()) + "[";
  for (const std::string& arg : args)
    expected +=
        std::to_string(REDIS_REPLY_STRING) + ":" + std::to_string(arg.size()) + ":" + arg + ",";
  expected += "]";
  require(echoed.replies[0] == expected, "a formatted command reads back otherwise");
  return 0;
}
