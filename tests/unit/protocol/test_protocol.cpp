// Protocol v1 parsing and formatting: exact replies, codes and messages.
#include "redlockd/protocol/protocol.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace redlockd;

namespace {

const request_limits limits{}; // 10 .. 3600000
const std::string owner_a(40, 'a');
const std::string owner_mixed = "0123456789abcdef0123456789abcdef01234567";

request parse_ok(std::string_view line, const request_limits& l = limits) {
  INFO("line: " << line);
  auto result = parse_request(line, l);
  if (const auto* e = std::get_if<parse_error>(&result))
    FAIL("unexpected ERR " << to_string(e->code) << " " << e->message);
  REQUIRE(std::holds_alternative<request>(result));
  return std::get<request>(result);
}

parse_error parse_err(std::string_view line, const request_limits& l = limits) {
  INFO("line: " << line);
  auto result = parse_request(line, l);
  REQUIRE(std::holds_alternative<parse_error>(result));
  auto e = std::get<parse_error>(result);
  // Every message is one non-empty line of printable text.
  CHECK_FALSE(e.message.empty());
  for (char c : e.message) {
    CHECK(static_cast<unsigned char>(c) >= 0x20);
    CHECK(static_cast<unsigned char>(c) < 0x7f);
  }
  return e;
}

err_code code_of(std::string_view line, const request_limits& l = limits) {
  return parse_err(line, l).code;
}

lock_request parse_lock(std::string_view line, const request_limits& l = limits) {
  const auto req = parse_ok(line, l);
  REQUIRE(std::holds_alternative<lock_request>(req));
  return std::get<lock_request>(req);
}

const std::string ttl_message = "ttl must be an integer between 10 and 3600000 ms";
const std::string resource_message = "resource must be 1-256 printable ASCII bytes without spaces";
const std::string owner_message = "owner must be 40 lowercase hex characters";

} // namespace

TEST_CASE("error codes have their wire names", "[protocol]") {
  CHECK(to_string(err_code::syntax) == "SYNTAX");
  CHECK(to_string(err_code::unknown_command) == "UNKNOWN_COMMAND");
  CHECK(to_string(err_code::bad_resource) == "BAD_RESOURCE");
  CHECK(to_string(err_code::bad_ttl) == "BAD_TTL");
  CHECK(to_string(err_code::bad_owner) == "BAD_OWNER");
  CHECK(to_string(err_code::line_too_long) == "LINE_TOO_LONG");
  CHECK(to_string(err_code::noauth) == "NOAUTH");
  CHECK(to_string(err_code::auth_failed) == "AUTH_FAILED");
  CHECK(to_string(err_code::too_many) == "TOO_MANY");
  CHECK(to_string(err_code::shutting_down) == "SHUTTING_DOWN");
  CHECK(to_string(err_code::internal) == "INTERNAL");
}

TEST_CASE("parse_decimal is strict", "[protocol]") {
  CHECK(parse_decimal("0") == 0u);
  CHECK(parse_decimal("7") == 7u);
  CHECK(parse_decimal("007") == 7u);
  CHECK(parse_decimal("3600000") == 3'600'000u);
  CHECK(parse_decimal("18446744073709551615") == 18'446'744'073'709'551'615u);
  CHECK(parse_decimal("00000000000000000001") == 1u); // 20 chars

  CHECK_FALSE(parse_decimal(""));
  CHECK_FALSE(parse_decimal("18446744073709551616"));
  CHECK_FALSE(parse_decimal("99999999999999999999"));
  CHECK_FALSE(parse_decimal("000000000000000000001")); // 21 chars
  CHECK_FALSE(parse_decimal("+5"));
  CHECK_FALSE(parse_decimal("-5"));
  CHECK_FALSE(parse_decimal("1e3"));
  CHECK_FALSE(parse_decimal(" 5"));
  CHECK_FALSE(parse_decimal("5 "));
  CHECK_FALSE(parse_decimal("0x10"));
  CHECK_FALSE(parse_decimal("1.0"));
  CHECK_FALSE(parse_decimal("1_000"));
  CHECK_FALSE(parse_decimal("\t5"));
  CHECK_FALSE(parse_decimal(std::string_view("5\0", 2)));
}

TEST_CASE("resources and owners are validated byte by byte", "[protocol]") {
  CHECK(is_valid_resource("r"));
  CHECK(is_valid_resource("!~"));
  CHECK(is_valid_resource("orders:42/{x}"));
  CHECK(is_valid_resource(std::string(256, 'x')));
  CHECK_FALSE(is_valid_resource(""));
  CHECK_FALSE(is_valid_resource(std::string(257, 'x')));
  CHECK_FALSE(is_valid_resource("a b"));
  CHECK_FALSE(is_valid_resource("a\tb"));
  CHECK_FALSE(is_valid_resource("a\x7f"));
  CHECK_FALSE(is_valid_resource("caf\xc3\xa9"));
  CHECK_FALSE(is_valid_resource(std::string_view("a\0b", 3)));

  CHECK(is_valid_owner(owner_a));
  CHECK(is_valid_owner(owner_mixed));
  CHECK_FALSE(is_valid_owner(std::string(39, 'a')));
  CHECK_FALSE(is_valid_owner(std::string(41, 'a')));
  CHECK_FALSE(is_valid_owner(std::string(40, 'A')));
  CHECK_FALSE(is_valid_owner(std::string(39, 'a') + "g"));
  CHECK_FALSE(is_valid_owner(""));
}

TEST_CASE("empty and all-space lines are ignored", "[protocol]") {
  CHECK(std::holds_alternative<std::monostate>(parse_request("", limits)));
  CHECK(std::holds_alternative<std::monostate>(parse_request(" ", limits)));
  CHECK(std::holds_alternative<std::monostate>(parse_request("      ", limits)));
  // A tab is not a separator: it is a (bad) verb, not an empty line.
  CHECK(code_of("\t") == err_code::unknown_command);
  CHECK(code_of(std::string_view("\0\0", 2)) == err_code::unknown_command);
}

TEST_CASE("PING takes zero or one word", "[protocol]") {
  auto req = parse_ok("PING");
  REQUIRE(std::holds_alternative<ping_request>(req));
  CHECK_FALSE(std::get<ping_request>(req).word);

  req = parse_ok("PING hello");
  REQUIRE(std::holds_alternative<ping_request>(req));
  CHECK(std::get<ping_request>(req).word == std::string_view("hello"));

  req = parse_ok("  ping   w\tx  ");
  REQUIRE(std::holds_alternative<ping_request>(req));
  CHECK(std::get<ping_request>(req).word == std::string_view("w\tx"));

  const auto e = parse_err("PING a b");
  CHECK(e.code == err_code::syntax);
  CHECK(e.message == "wrong number of arguments for 'PING'");
}

TEST_CASE("verbs are case-insensitive", "[protocol]") {
  CHECK(std::holds_alternative<ping_request>(parse_ok("ping")));
  CHECK(std::holds_alternative<ping_request>(parse_ok("PiNg")));
  CHECK(std::holds_alternative<hello_request>(parse_ok("hello")));
  CHECK(std::holds_alternative<auth_request>(parse_ok("Auth s3cret")));
  CHECK(std::holds_alternative<lock_request>(parse_ok("lock r 100")));
  CHECK(std::holds_alternative<unlock_request>(parse_ok("unlock r " + owner_a)));
  CHECK(std::holds_alternative<extend_request>(parse_ok("eXtEnD r " + owner_a + " 100")));
  CHECK(std::holds_alternative<info_request>(parse_ok("info")));
  CHECK(std::holds_alternative<quit_request>(parse_ok("Quit")));
}

TEST_CASE("HELLO, INFO and QUIT take no arguments - AUTH takes exactly one", "[protocol]") {
  CHECK(std::holds_alternative<hello_request>(parse_ok("HELLO")));
  CHECK(std::holds_alternative<info_request>(parse_ok("INFO")));
  CHECK(std::holds_alternative<quit_request>(parse_ok("QUIT")));
  CHECK(parse_err("HELLO 1").message == "wrong number of arguments for 'HELLO'");
  CHECK(parse_err("info x").message == "wrong number of arguments for 'INFO'");
  CHECK(parse_err("QUIT now").message == "wrong number of arguments for 'QUIT'");
  CHECK(parse_err("HELLO 1").code == err_code::syntax);

  const auto req = parse_ok("AUTH  top-secret ");
  REQUIRE(std::holds_alternative<auth_request>(req));
  CHECK(std::get<auth_request>(req).secret == "top-secret");
  CHECK(parse_err("AUTH").message == "wrong number of arguments for 'AUTH'");
  CHECK(parse_err("AUTH a b").code == err_code::syntax);
}

TEST_CASE("unknown verbs are echoed only when safe", "[protocol]") {
  auto e = parse_err("FOO bar");
  CHECK(e.code == err_code::unknown_command);
  CHECK(e.message == "unknown command 'FOO'");

  e = parse_err("get");
  CHECK(e.message == "unknown command 'get'");

  const std::string verb32(32, 'V');
  CHECK(parse_err(verb32).message == "unknown command '" + verb32 + "'");

  // Too long, control bytes, non-ASCII: the message leaves the verb out.
  for (const std::string& bad : {std::string(33, 'V'), std::string("A\tB"), std::string("X\x01"),
                                 std::string("\xff\xfe"), std::string("X\r")}) {
    e = parse_err(bad);
    CHECK(e.code == err_code::unknown_command);
    CHECK(e.message == "unknown command");
  }
}

TEST_CASE("LOCK parses resource, ttl and options", "[protocol]") {
  auto req = parse_lock("LOCK orders:42 5000");
  CHECK(req.resource == "orders:42");
  CHECK(req.ttl_ms == 5000);
  CHECK_FALSE(req.wait_ms);
  CHECK_FALSE(req.keep);

  req = parse_lock("LOCK r 100 WAIT 2000");
  CHECK(req.wait_ms == 2000u);
  CHECK_FALSE(req.keep);

  req = parse_lock("LOCK r 100 KEEP");
  CHECK_FALSE(req.wait_ms);
  CHECK(req.keep);

  req = parse_lock("LOCK r 100 WAIT 0 KEEP");
  CHECK(req.wait_ms == 0u);
  CHECK(req.keep);

  req = parse_lock("LOCK r 100 KEEP WAIT 7");
  CHECK(req.wait_ms == 7u);
  CHECK(req.keep);

  req = parse_lock("lock   r   100   wait 3600000   keep  ");
  CHECK(req.wait_ms == 3'600'000u);
  CHECK(req.keep);

  req = parse_lock("LOCK r 0100 Wait 010 Keep");
  CHECK(req.ttl_ms == 100);
  CHECK(req.wait_ms == 10u);
}

TEST_CASE("LOCK arity and option errors are SYNTAX", "[protocol]") {
  // LOCK takes at most 12 tokens: r, ttl, WAIT ms, KEEP, SHARED | PERMITS n, LABEL l, MAXHOLD ms.
  for (const std::string& line :
       std::vector<std::string>{"LOCK", "LOCK r", "LOCK r 100 a b c d e f g h i j",
                                "LOCK r 100 WAIT 1 KEEP PERMITS 2 LABEL x MAXHOLD 9 KEEP"}) {
    const auto e = parse_err(line);
    CHECK(e.code == err_code::syntax);
    CHECK(e.message == "wrong number of arguments for 'LOCK'");
  }
  CHECK(parse_err("LOCK r 100 KEEP KEEP KEEP KEEP").message == "KEEP given twice");
  for (const std::string& line : std::vector<std::string>{
           "LOCK r 100 KEEP KEEP", "LOCK r 100 WAIT 1 WAIT 2", "LOCK r 100 WAIT 1 KEEP wait 2",
           "LOCK r 100 WAIT", "LOCK r 100 KEEP WAIT", "LOCK r 100 FOREVER", "LOCK r 100 KEEPX",
           "LOCK r 100 NX", "LOCK r 100 WAIT 1 KEEP x", "LOCK r 100 a b c d e f g h"}) {
    CAPTURE(line);
    CHECK(code_of(line) == err_code::syntax);
  }
}

TEST_CASE("LOCK ttl boundaries and malformed numbers are BAD_TTL", "[protocol]") {
  CHECK(parse_lock("LOCK r 10").ttl_ms == 10);
  CHECK(parse_lock("LOCK r 3600000").ttl_ms == 3'600'000);
  for (const std::string& ttl : std::vector<std::string>{
           "9", "0", "3600001", "+5", "-5", "1e3", "10.0", "0x10", "ten", "18446744073709551615",
           "18446744073709551616", "99999999999999999999999", "100\t", "\x31\x30\x30\x01"}) {
    CAPTURE(ttl);
    const auto e = parse_err("LOCK r " + ttl);
    CHECK(e.code == err_code::bad_ttl);
    CHECK(e.message == ttl_message);
  }
}

TEST_CASE("limits come from the caller", "[protocol]") {
  const request_limits narrow{100, 2000};
  CHECK(parse_lock("LOCK r 100", narrow).ttl_ms == 100);
  CHECK(parse_lock("LOCK r 2000", narrow).ttl_ms == 2000);
  CHECK(parse_err("LOCK r 99", narrow).message == "ttl must be an integer between 100 and 2000 ms");
  CHECK(parse_err("LOCK r 2001", narrow).code == err_code::bad_ttl);
  CHECK(parse_lock("LOCK r 100 WAIT 2000", narrow).wait_ms == 2000u);
  CHECK(parse_err("LOCK r 100 WAIT 2001", narrow).code == err_code::bad_ttl);
  CHECK(parse_err("EXTEND r " + owner_a + " 2001", narrow).code == err_code::bad_ttl);
}

TEST_CASE("LOCK WAIT value must be a decimal in [0, max_ttl_ms]", "[protocol]") {
  for (const std::string& wait : std::vector<std::string>{"3600001", "-1", "+1", "1e3", "x", "KEEP",
                                                          "18446744073709551616"}) {
    CAPTURE(wait);
    CHECK(code_of("LOCK r 100 WAIT " + wait) == err_code::bad_ttl);
  }
}

TEST_CASE("LOCK resource boundaries are BAD_RESOURCE", "[protocol]") {
  CHECK(parse_lock("LOCK " + std::string(256, 'x') + " 100").resource.size() == 256);
  CHECK(parse_lock("LOCK ! 100").resource == "!");
  for (const std::string& resource :
       {std::string(257, 'x'), std::string("a\tb"), std::string("\x7f"), std::string("\xc3\xa9"),
        std::string("a\rb"), std::string("a\0b", 3)}) {
    const auto e = parse_err("LOCK " + resource + " 100");
    CHECK(e.code == err_code::bad_resource);
    CHECK(e.message == resource_message);
  }
}

TEST_CASE("validation order: arity, resource, owner, ttl, options", "[protocol]") {
  // Arity first, even when everything else is wrong too.
  CHECK(code_of("LOCK " + std::string(300, 'x')) == err_code::syntax);
  CHECK(code_of("UNLOCK \x01") == err_code::syntax);
  CHECK(code_of("EXTEND \x01 zz") == err_code::syntax);
  // Resource before ttl and options.
  CHECK(code_of("LOCK \x01 -5 BOGUS") == err_code::bad_resource);
  // Ttl before options.
  CHECK(code_of("LOCK r -5 BOGUS") == err_code::bad_ttl);
  CHECK(code_of("LOCK r 5 KEEP KEEP") == err_code::bad_ttl);
  // Resource before owner before ttl.
  CHECK(code_of("EXTEND \x01 zz -1") == err_code::bad_resource);
  CHECK(code_of("EXTEND r zz -1") == err_code::bad_owner);
  CHECK(code_of("UNLOCK \x01 zz") == err_code::bad_resource);
}

TEST_CASE("UNLOCK parses resource and owner", "[protocol]") {
  const std::string line = "UNLOCK orders:42 " + owner_mixed; // the views point into it
  const auto req = parse_ok(line);
  REQUIRE(std::holds_alternative<unlock_request>(req));
  CHECK(std::get<unlock_request>(req).resource == "orders:42");
  CHECK(std::get<unlock_request>(req).owner == owner_mixed);

  CHECK(parse_err("UNLOCK r").message == "wrong number of arguments for 'UNLOCK'");
  CHECK(parse_err("UNLOCK r " + owner_a + " x").code == err_code::syntax);
  for (const std::string& owner : {std::string(39, 'a'), std::string(41, 'a'), std::string(40, 'A'),
                                   std::string(39, 'a') + "g"}) {
    const auto e = parse_err("UNLOCK r " + owner);
    CHECK(e.code == err_code::bad_owner);
    CHECK(e.message == owner_message);
  }
  CHECK(parse_err("UNLOCK " + std::string(257, 'r') + " " + owner_a).code ==
        err_code::bad_resource);
}

TEST_CASE("EXTEND parses resource, owner and ttl", "[protocol]") {
  const std::string line = "EXTEND r " + owner_a + " 6000"; // the views point into it
  const auto req = parse_ok(line);
  REQUIRE(std::holds_alternative<extend_request>(req));
  CHECK(std::get<extend_request>(req).resource == "r");
  CHECK(std::get<extend_request>(req).owner == owner_a);
  CHECK(std::get<extend_request>(req).ttl_ms == 6000);

  CHECK(parse_err("EXTEND r " + owner_a).message == "wrong number of arguments for 'EXTEND'");
  CHECK(parse_err("EXTEND r " + owner_a + " 100 KEEP").code == err_code::syntax);
  CHECK(parse_err("EXTEND r " + std::string(40, 'z') + " 100").code == err_code::bad_owner);
  CHECK(parse_err("EXTEND r " + owner_a + " 9").message == ttl_message);
  CHECK(parse_err("EXTEND r " + owner_a + " 3600001").code == err_code::bad_ttl);
  CHECK(parse_err("EXTEND r " + owner_a + " 1e3").code == err_code::bad_ttl);
}

TEST_CASE("parsed views point into the line", "[protocol]") {
  const std::string line = "LOCK res 100";
  const auto req = parse_lock(line);
  CHECK(req.resource.data() == line.data() + 5);
}

TEST_CASE("line_splitter splits on LF and strips one CR", "[protocol]") {
  line_splitter s(64);
  std::string_view line;
  CHECK(s.next(line) == line_splitter::status::need_more);

  s.feed("PING a\nPING b\r\n\n\r\nPI");
  REQUIRE(s.next(line) == line_splitter::status::line);
  CHECK(line == "PING a");
  REQUIRE(s.next(line) == line_splitter::status::line);
  CHECK(line == "PING b");
  REQUIRE(s.next(line) == line_splitter::status::line);
  CHECK(line.empty());
  REQUIRE(s.next(line) == line_splitter::status::line);
  CHECK(line.empty());
  CHECK(s.next(line) == line_splitter::status::need_more);
  CHECK(s.buffered() == 2);

  s.feed("NG c\r");
  CHECK(s.next(line) == line_splitter::status::need_more);
  s.feed("\n");
  REQUIRE(s.next(line) == line_splitter::status::line);
  CHECK(line == "PING c");
  CHECK(s.next(line) == line_splitter::status::need_more);
  CHECK(s.buffered() == 0);

  // Only one CR is stripped; a lone CR inside a line is kept.
  s.feed("a\r\r\nb\rc\n");
  REQUIRE(s.next(line) == line_splitter::status::line);
  CHECK(line == "a\r");
  REQUIRE(s.next(line) == line_splitter::status::line);
  CHECK(line == "b\rc");
}

TEST_CASE("line_splitter accepts exactly max_line_bytes and refuses one more", "[protocol]") {
  std::string_view line;
  const std::string exact(64, 'x');

  SECTION("exact with LF") {
    line_splitter s(64);
    s.feed(exact + "\n");
    REQUIRE(s.next(line) == line_splitter::status::line);
    CHECK(line == exact);
  }
  SECTION("exact with CRLF, the CR arriving alone first") {
    line_splitter s(64);
    s.feed(exact + "\r");
    CHECK(s.next(line) == line_splitter::status::need_more);
    s.feed("\n");
    REQUIRE(s.next(line) == line_splitter::status::line);
    CHECK(line == exact);
  }
  SECTION("one more without LF is reported at once") {
    line_splitter s(64);
    s.feed(exact);
    CHECK(s.next(line) == line_splitter::status::need_more);
    s.feed("x");
    CHECK(s.next(line) == line_splitter::status::too_long);
  }
  SECTION("one more with LF") {
    line_splitter s(64);
    s.feed(exact + "x\n");
    CHECK(s.next(line) == line_splitter::status::too_long);
  }
  SECTION("one more with CRLF") {
    line_splitter s(64);
    s.feed(exact + "x\r\n");
    CHECK(s.next(line) == line_splitter::status::too_long);
  }
  SECTION("a CR that is not followed by LF counts") {
    line_splitter s(64);
    s.feed(exact + "\rx");
    CHECK(s.next(line) == line_splitter::status::too_long);
  }
  SECTION("good lines first, then a long one") {
    line_splitter s(64);
    s.feed("PING 1\n" + std::string(100, 'B'));
    REQUIRE(s.next(line) == line_splitter::status::line);
    CHECK(line == "PING 1");
    CHECK(s.next(line) == line_splitter::status::too_long);
    CHECK(s.next(line) == line_splitter::status::too_long); // stays so
  }
}

TEST_CASE("line_splitter survives byte-by-byte feeding and long pipelines", "[protocol]") {
  line_splitter s(4096);
  std::string_view line;
  std::vector<std::string> got;
  std::string stream;
  for (int i = 0; i < 2000; ++i)
    stream += "PING " + std::to_string(i) + (i % 2 == 0 ? "\n" : "\r\n");

  // Byte by byte.
  for (char c : stream) {
    s.feed(std::string_view(&c, 1));
    while (s.next(line) == line_splitter::status::line)
      got.emplace_back(line);
  }
  // All at once.
  s.feed(stream);
  while (s.next(line) == line_splitter::status::line)
    got.emplace_back(line);
  // In chunks of 7 bytes.
  for (std::size_t pos = 0; pos < stream.size(); pos += 7) {
    s.feed(std::string_view(stream).substr(pos, 7));
    while (s.next(line) == line_splitter::status::line)
      got.emplace_back(line);
  }

  REQUIRE(got.size() == 6000);
  for (std::size_t i = 0; i < got.size(); ++i)
    REQUIRE(got[i] == "PING " + std::to_string(i % 2000));
  CHECK(s.buffered() == 0);
}

TEST_CASE("reply lines are formatted exactly", "[protocol]") {
  CHECK(format_ok() == "OK\n");
  CHECK(format_pong(std::nullopt) == "PONG\n");
  CHECK(format_pong(std::string_view("hi")) == "PONG hi\n");
  CHECK(format_hello("0.1.0", 5, 3) == "OK redlockd 0.1.0 proto=1.1 nodes=5 quorum=3\n");
  CHECK(format_lock_ok(owner_a, 42, 9898) == "OK " + owner_a + " 42 9898\n");
  CHECK(format_lock_ok(owner_a, 18'446'744'073'709'551'615u, 0) ==
        "OK " + owner_a + " 18446744073709551615 0\n");
  CHECK(format_extend_ok(5940) == "OK 5940\n");
  CHECK(format_busy(0) == "BUSY 0\n");
  CHECK(format_busy(1234) == "BUSY 1234\n");
  CHECK(format_noquorum(2, 3) == "NOQUORUM 2 3\n");
  CHECK(format_notheld() == "NOTHELD\n");
  CHECK(format_error(err_code::bad_ttl, ttl_message) == "ERR BAD_TTL " + ttl_message + "\n");
  CHECK(format_error(err_code::line_too_long, "line longer than 4096 bytes; closing") ==
        "ERR LINE_TOO_LONG line longer than 4096 bytes; closing\n");
  CHECK(format_info(R"({"version":"0.1.0"})") == "OK {\"version\":\"0.1.0\"}\n");
  CHECK(format_lost("orders:42", owner_a) == "LOST orders:42 " + owner_a + "\n");
}

TEST_CASE("format_error never lets a message break the line", "[protocol]") {
  const auto reply = format_error(err_code::internal, "bad\r\nthing\x01\x7f here");
  REQUIRE(reply.size() > 4);
  CHECK(reply.rfind("ERR INTERNAL bad", 0) == 0);
  CHECK(reply.back() == '\n');
  const std::string body = reply.substr(0, reply.size() - 1);
  for (char c : body) {
    CHECK(static_cast<unsigned char>(c) >= 0x20);
    CHECK(c != 0x7f);
  }
  CHECK(body.find("thing") != std::string::npos);
  CHECK(body.find("here") != std::string::npos);
}

TEST_CASE("parser errors round-trip through format_error", "[protocol]") {
  const auto e = parse_err("LOCK r 5");
  CHECK(format_error(e.code, e.message) ==
        "ERR BAD_TTL ttl must be an integer between 10 and 3600000 ms\n");
  const auto s = parse_err("LOCK r");
  CHECK(format_error(s.code, s.message) == "ERR SYNTAX wrong number of arguments for 'LOCK'\n");
  const auto r = parse_err("LOCK " + std::string(257, 'r') + " 100");
  CHECK(format_error(r.code, r.message) ==
        "ERR BAD_RESOURCE resource must be 1-256 printable ASCII bytes without spaces\n");
  const auto o = parse_err("UNLOCK r abc");
  CHECK(format_error(o.code, o.message) ==
        "ERR BAD_OWNER owner must be 40 lowercase hex characters\n");
  const auto u = parse_err("FOO");
  CHECK(format_error(u.code, u.message) == "ERR UNKNOWN_COMMAND unknown command 'FOO'\n");
}

TEST_CASE("line_splitter gives back a burst's capacity and keeps the unfinished line",
          "[protocol]") {
  line_splitter s(4096);
  std::string burst;
  for (int i = 0; i < 500; ++i)
    burst += "PING " + std::to_string(i) + "\n";
  burst += "PING unfin"; // a partial line at the end of the burst
  s.feed(burst);
  std::string_view line;
  int lines = 0;
  while (s.next(line) == line_splitter::status::line)
    ++lines;
  CHECK(lines == 500);
  REQUIRE(s.capacity() > 4096);
  s.release_spare(1024);
  CHECK(s.capacity() < 1024);
  CHECK(s.buffered() == 10);
  s.feed("ished\nPING next\n");
  REQUIRE(s.next(line) == line_splitter::status::line);
  CHECK(line == "PING unfinished");
  REQUIRE(s.next(line) == line_splitter::status::line);
  CHECK(line == "PING next");
  CHECK(s.next(line) == line_splitter::status::need_more);
}

TEST_CASE("line_splitter keeps its buffer while a long line is unfinished", "[protocol]") {
  line_splitter s(4096);
  std::string_view line;
  s.feed(std::string(3000, 'x'));
  CHECK(s.next(line) == line_splitter::status::need_more);
  const std::size_t held = s.capacity();
  s.release_spare(1024); // 3000 bytes of line: more than it may keep, nothing is copied
  CHECK(s.capacity() == held);
  s.feed(std::string(1097, 'x'));
  CHECK(s.next(line) == line_splitter::status::too_long);
}

// ---------------------------------------------------------------------------------------------
// Protocol v1.1: the lock family and the requests for operating locks.

TEST_CASE("v1.1 error codes have their wire names", "[protocol]") {
  CHECK(to_string(err_code::bad_count) == "BAD_COUNT");
  CHECK(to_string(err_code::bad_label) == "BAD_LABEL");
  CHECK(to_string(err_code::permits_mismatch) == "PERMITS_MISMATCH");
}

TEST_CASE("LOCK SHARED, PERMITS, LABEL and MAXHOLD", "[protocol]") {
  auto req = parse_lock("LOCK r 100");
  CHECK(req.mode == lock_mode::exclusive);
  CHECK_FALSE(req.label);
  CHECK_FALSE(req.max_hold_ms);

  req = parse_lock("LOCK r 100 shared");
  CHECK(req.mode == lock_mode::shared);

  req = parse_lock("LOCK s 100 Permits 0003 WAIT 5");
  CHECK(req.mode == lock_mode::permits);
  CHECK(req.permits == 3);
  CHECK(req.wait_ms == 5u);

  req = parse_lock("LOCK r 100 LABEL web-1:4242 KEEP MAXHOLD 60000 SHARED WAIT 0");
  CHECK(req.mode == lock_mode::shared);
  CHECK(req.label == "web-1:4242");
  CHECK(req.max_hold_ms == 60000u);
  CHECK(req.keep);
  CHECK(req.wait_ms == 0u);

  CHECK(parse_lock("LOCK s 100 PERMITS 1").permits == 1);
  CHECK(parse_lock("LOCK s 100 PERMITS 1024").permits == 1024);
  CHECK(parse_lock("LOCK r 100 LABEL " + std::string(64, '~')).label->size() == 64);
  CHECK(parse_lock("LOCK r 100 LABEL label").label == "label"); // a label may look like an option
}

TEST_CASE("LOCK v1.1 option errors", "[protocol]") {
  for (const std::string& line : std::vector<std::string>{
           "LOCK r 100 SHARED SHARED", "LOCK r 100 SHARED PERMITS 2", "LOCK r 100 PERMITS 2 SHARED",
           "LOCK r 100 PERMITS 2 PERMITS 2", "LOCK r 100 PERMITS", "LOCK r 100 LABEL",
           "LOCK r 100 LABEL a LABEL b", "LOCK r 100 MAXHOLD 5", "LOCK r 100 KEEP MAXHOLD",
           "LOCK r 100 KEEP MAXHOLD 5 MAXHOLD 5", "LOCK r 100 WAIT 5 MAXHOLD 5"}) {
    CAPTURE(line);
    CHECK(code_of(line) == err_code::syntax);
  }
  CHECK(parse_err("LOCK r 100 SHARED PERMITS 2").message ==
        "SHARED and PERMITS exclude each other");
  CHECK(parse_err("LOCK r 100 MAXHOLD 5").message == "MAXHOLD needs KEEP");
  for (const std::string& n : std::vector<std::string>{"0", "1025", "-1", "x", "2.0", "1e2"}) {
    CAPTURE(n);
    const auto e = parse_err("LOCK s 100 PERMITS " + n);
    CHECK(e.code == err_code::bad_count);
    CHECK(e.message == "PERMITS must be an integer between 1 and 1024");
  }
  for (const std::string& label :
       {std::string(65, 'x'), std::string("a\tb"), std::string("\x7f"), std::string("\xc3\xa9")}) {
    const auto e = parse_err("LOCK r 100 LABEL " + label);
    CHECK(e.code == err_code::bad_label);
    CHECK(e.message == "label must be 1-64 printable ASCII bytes without spaces");
  }
  CHECK(code_of("LOCK r 100 KEEP MAXHOLD 0") == err_code::bad_ttl);
  CHECK(code_of("LOCK r 100 KEEP MAXHOLD x") == err_code::bad_ttl);
  // The ttl is checked before any option, and options in the order given.
  CHECK(code_of("LOCK r 5 PERMITS 0") == err_code::bad_ttl);
  CHECK(code_of("LOCK r 100 PERMITS 0 LABEL \x01") == err_code::bad_count);
  CHECK(code_of("LOCK r 100 LABEL \x01 PERMITS 0") == err_code::bad_label);
  const request_limits few{10, 3'600'000, 4, 8};
  CHECK(parse_lock("LOCK s 100 PERMITS 4", few).permits == 4);
  CHECK(parse_err("LOCK s 100 PERMITS 5", few).message ==
        "PERMITS must be an integer between 1 and 4");
}

TEST_CASE("MLOCK, MUNLOCK and MEXTEND take a counted list of resources", "[protocol]") {
  const auto req = parse_ok("MLOCK 3 b a c 5000 WAIT 100 KEEP LABEL job:7 MAXHOLD 9000");
  REQUIRE(std::holds_alternative<mlock_request>(req));
  const auto& m = std::get<mlock_request>(req);
  CHECK(m.resources == std::vector<std::string_view>{"b", "a", "c"});
  CHECK(m.ttl_ms == 5000);
  CHECK(m.wait_ms == 100u);
  CHECK(m.keep);
  CHECK(m.label == "job:7");
  CHECK(m.max_hold_ms == 9000u);

  const std::string munlock = "munlock 2 x y " + owner_mixed; // the request points into it
  const auto u = parse_ok(munlock);
  REQUIRE(std::holds_alternative<munlock_request>(u));
  CHECK(std::get<munlock_request>(u).resources == std::vector<std::string_view>{"x", "y"});
  CHECK(std::get<munlock_request>(u).owner == owner_mixed);

  const std::string mextend = "MEXTEND 1 x " + owner_a + " 700";
  const auto e = parse_ok(mextend);
  REQUIRE(std::holds_alternative<mextend_request>(e));
  CHECK(std::get<mextend_request>(e).ttl_ms == 700);

  std::string sixty_four = "MLOCK 64";
  for (int i = 0; i < 64; ++i)
    sixty_four += " r" + std::to_string(i);
  CHECK(std::get<mlock_request>(parse_ok(sixty_four + " 100")).resources.size() == 64);
  CHECK(parse_err(sixty_four.replace(6, 2, "65") + " 100").code == err_code::bad_count);
}

TEST_CASE("MLOCK family errors, in order: arity, count, resources, owner, ttl, options",
          "[protocol]") {
  for (const std::string& line : std::vector<std::string>{
           "MLOCK", "MLOCK 1", "MLOCK 1 a", "MLOCK 3 a b 100", "MUNLOCK 1 a",
           "MUNLOCK 2 a " + owner_a, "MUNLOCK 1 a " + owner_a + " x", "MEXTEND 1 a " + owner_a,
           "MEXTEND 1 a " + owner_a + " 100 x", "MLOCK 1 a 100 WAIT 1 KEEP LABEL l MAXHOLD 9 x"}) {
    CAPTURE(line);
    CHECK(code_of(line) == err_code::syntax);
  }
  for (const std::string& line :
       std::vector<std::string>{"MLOCK 0 a 100", "MLOCK x a 100", "MLOCK 65 a 100",
                                "MUNLOCK -1 a " + owner_a, "MEXTEND 1.0 a " + owner_a + " 100"}) {
    CAPTURE(line);
    CHECK(code_of(line) == err_code::bad_count);
  }
  CHECK(parse_err("MLOCK 0 a 100").message == "MLOCK count must be an integer between 1 and 64");
  CHECK(code_of("MLOCK 2 a \x01 100") == err_code::bad_resource);
  CHECK(parse_err("MLOCK 3 a b a 100").message == "a resource is named twice");
  CHECK(code_of("MUNLOCK 2 a a " + owner_a) == err_code::bad_resource);
  CHECK(code_of("MUNLOCK 2 a b zz") == err_code::bad_owner);
  CHECK(code_of("MEXTEND 2 a b zz 5") == err_code::bad_owner);
  CHECK(code_of("MEXTEND 2 a b " + owner_a + " 5") == err_code::bad_ttl);
  CHECK(code_of("MLOCK 2 a b 5 SHARED") == err_code::bad_ttl);
  CHECK(parse_err("MLOCK 2 a b 100 SHARED").message ==
        "unknown MLOCK option; expected WAIT <ms>, KEEP, LABEL <label> or MAXHOLD <ms>");
  CHECK(code_of("MLOCK 2 a b 100 PERMITS 2") == err_code::syntax);
  CHECK(code_of("MLOCK 2 a b 100 MAXHOLD 5") == err_code::syntax);
}

TEST_CASE("LIST takes a prefix and a COUNT, clamped to 1000", "[protocol]") {
  const auto list = [](std::string_view line) {
    const auto req = parse_ok(line);
    REQUIRE(std::holds_alternative<list_request>(req));
    return std::get<list_request>(req);
  };
  CHECK(list("LIST").prefix.empty());
  CHECK(list("LIST").count == 100);
  CHECK(list("LIST orders:").prefix == "orders:");
  CHECK(list("LIST count 5").count == 5);
  CHECK(list("LIST count 5").prefix.empty());
  CHECK(list("LIST orders: COUNT 1000").count == 1000);
  CHECK(list("LIST orders: COUNT 1001").count == 1000);
  CHECK(code_of("LIST orders: COUNT 99999999999999999999") == err_code::bad_count); // over u64
  CHECK(list("LIST COUNT").prefix == "COUNT"); // one argument: a prefix
  CHECK(code_of("LIST a b") == err_code::syntax);
  CHECK(code_of("LIST a COUNT 1 x") == err_code::syntax);
  CHECK(code_of("LIST COUNT 0") == err_code::bad_count);
  CHECK(code_of("LIST a COUNT x") == err_code::bad_count);
  CHECK(code_of("LIST \x01") == err_code::bad_resource);
}

TEST_CASE("BREAK takes one resource and STATUS is unchanged", "[protocol]") {
  const auto req = parse_ok("break orders:1");
  REQUIRE(std::holds_alternative<break_request>(req));
  CHECK(std::get<break_request>(req).resource == "orders:1");
  CHECK(parse_err("BREAK").message == "wrong number of arguments for 'BREAK'");
  CHECK(code_of("BREAK a b") == err_code::syntax);
  CHECK(code_of("BREAK \x01") == err_code::bad_resource);
}
