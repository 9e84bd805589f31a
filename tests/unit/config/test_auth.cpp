// Authentication logic: the constant-time compare, where secrets come from, the per-connection
// AUTH state, the configuration keys, and the log budget for refused attempts.
#include "redlockd/config/auth.hpp"
#include "redlockd/config/config.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <csetjmp>
#include <csignal>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <string_view>
#include <sys/mman.h>
#include <unistd.h>

using namespace redlockd;

namespace {

// Files and environment variables held in maps instead of on the machine.
struct fake_machine {
  std::map<std::string, std::string> files;
  std::map<std::string, std::string> env;

  secret_sources sources() const {
    return {[this](const std::string& path) -> std::optional<std::string> {
              const auto it = files.find(path);
              return it == files.end() ? std::nullopt : std::optional<std::string>(it->second);
            },
            [this](const char* name) -> std::optional<std::string> {
              const auto it = env.find(name);
              return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
            }};
  }
};

config resolved(std::string_view json, const fake_machine& machine) {
  config cfg = parse_config(json);
  resolve_secrets(cfg, machine.sources());
  return cfg;
}

std::string resolve_message(std::string_view json, const fake_machine& machine) {
  try {
    resolved(json, machine);
  } catch (const config_error& e) {
    return e.what();
  }
  FAIL("accepted: " << json);
  return {};
}

std::string parse_message(std::string_view json) {
  try {
    parse_config(json);
  } catch (const config_error& e) {
    return e.what();
  }
  FAIL("accepted: " << json);
  return {};
}

} // namespace

TEST_CASE("constant_time_equals is plain equality", "[unit][auth]") {
  CHECK(constant_time_equals("s3cret", "s3cret"));
  CHECK_FALSE(constant_time_equals("s3cres", "s3cret"));
  CHECK_FALSE(constant_time_equals("S3cret", "s3cret"));
  // Prefixes and extensions: the secret repeated must not match a longer candidate.
  CHECK_FALSE(constant_time_equals("s3cre", "s3cret"));
  CHECK_FALSE(constant_time_equals("s3crets3cret", "s3cret"));
  CHECK_FALSE(constant_time_equals("s3crets", "s3cret"));
  CHECK_FALSE(constant_time_equals("", "s3cret"));
  CHECK_FALSE(constant_time_equals("x", ""));
  CHECK(constant_time_equals("", ""));
  // Any byte differing anywhere, the high bit included.
  const std::string secret(64, 'a');
  for (std::size_t i = 0; i < secret.size(); ++i) {
    std::string candidate = secret;
    candidate[i] = static_cast<char>(0xe1);
    CHECK_FALSE(constant_time_equals(candidate, secret));
  }
  // A candidate whose size differs by a multiple of 256 (size_t xor, not a byte).
  CHECK_FALSE(constant_time_equals(std::string(256, 'a'), std::string(512, 'a')));
}

namespace {

// Two pages; bytes placed so that the last of them lies on the second page, which is then made
// unreadable: reading that byte raises SIGSEGV, caught here. Shows whether a function read it.
class guard_page {
 public:
  guard_page() : page_(static_cast<std::size_t>(::sysconf(_SC_PAGESIZE))) {
    void* base =
        ::mmap(nullptr, 2 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(base != MAP_FAILED);
    base_ = static_cast<char*>(base);
  }
  ~guard_page() { ::munmap(base_, 2 * page_); }
  guard_page(const guard_page&) = delete;
  guard_page& operator=(const guard_page&) = delete;

  // A copy of `text` whose last byte is the first byte of the guarded page.
  std::string_view place(const std::string& text) {
    REQUIRE(!text.empty());
    REQUIRE(text.size() <= page_);
    char* start = base_ + page_ + 1 - text.size();
    std::memcpy(start, text.data(), text.size());
    REQUIRE(::mprotect(base_ + page_, page_, PROT_NONE) == 0);
    return {start, text.size()};
  }

  // Runs `f`; true when it touched the guarded page.
  static bool touches(const std::function<void()>& f) {
    struct sigaction ours {};
    ours.sa_handler = [](int) { ::siglongjmp(jump_, 1); };
    sigemptyset(&ours.sa_mask);
    struct sigaction old_segv {};
    struct sigaction old_bus {};
    ::sigaction(SIGSEGV, &ours, &old_segv);
    ::sigaction(SIGBUS, &ours, &old_bus);
    bool touched = true;
    if (sigsetjmp(jump_, 1) == 0) {
      f();
      touched = false;
    }
    ::sigaction(SIGSEGV, &old_segv, nullptr);
    ::sigaction(SIGBUS, &old_bus, nullptr);
    return touched;
  }

 private:
  static inline sigjmp_buf jump_;
  std::size_t page_;
  char* base_ = nullptr;
};

} // namespace

TEST_CASE("constant_time_equals reads every byte even after an early mismatch", "[unit][auth]") {
  // A compare that stopped at the first differing byte would leak, by its time, how much of a
  // guess was right. This one must read the whole candidate, and the secret to its last byte,
  // though the very first byte differs.
  const std::string secret(300, 'k');
  std::string early = secret;
  early.front() = 'x';
  SECTION("the candidate's last byte") {
    guard_page guard;
    const std::string_view candidate = guard.place(early);
    CHECK(guard_page::touches([&] { (void)constant_time_equals(candidate, secret); }));
  }
  SECTION("the secret's last byte") {
    guard_page guard;
    const std::string_view guarded_secret = guard.place(secret);
    CHECK(guard_page::touches([&] { (void)constant_time_equals(early, guarded_secret); }));
  }
  SECTION("and a wrong length does not end it either") {
    guard_page guard;
    const std::string_view candidate = guard.place(early + "extra");
    CHECK(guard_page::touches([&] { (void)constant_time_equals(candidate, secret); }));
  }
  SECTION("the guard itself: a compare that reads a prefix only does not touch it") {
    guard_page guard;
    const std::string_view candidate = guard.place(early);
    CHECK_FALSE(guard_page::touches(
        [&] { (void)constant_time_equals(candidate.substr(0, candidate.size() - 1), secret); }));
  }
}

TEST_CASE("constant_time_equals: time for an early and a late mismatch (figures)",
          "[.benchmark][auth]") {
  // Hidden (run with "[benchmark]"): figures only, timing is no pass/fail. A compare that
  // stopped at the first differing byte would show the early mismatch far faster than the late.
  const std::string secret(4096, 'k');
  std::string early = secret;
  early.front() = 'x';
  std::string late = secret;
  late.back() = 'x';
  const std::string short_secret = "k";
  auto time_of = [](const std::string& candidate, const std::string& against) {
    const auto start = std::chrono::steady_clock::now();
    bool any = false;
    for (int i = 0; i < 2000; ++i)
      any = any || constant_time_equals(candidate, against);
    const auto took = std::chrono::steady_clock::now() - start;
    CHECK_FALSE(any);
    return std::chrono::duration<double, std::micro>(took).count() / 2000;
  };
  std::cout << "constant_time_equals, 4096-byte candidate: early mismatch "
            << time_of(early, secret) << " us, late mismatch " << time_of(late, secret)
            << " us, against a 1-byte secret " << time_of(late, short_secret) << " us\n";
}

TEST_CASE("secret files lose one trailing newline", "[unit][auth]") {
  CHECK(strip_trailing_newline("abc\n") == "abc");
  CHECK(strip_trailing_newline("abc\r\n") == "abc");
  CHECK(strip_trailing_newline("abc\n\n") == "abc\n");
  CHECK(strip_trailing_newline("abc") == "abc");
  CHECK(strip_trailing_newline("\n").empty());
}

TEST_CASE("the client secret comes from client_secret_file, else from the environment",
          "[unit][auth][config]") {
  fake_machine machine;
  SECTION("neither: authentication is off") {
    const config cfg = resolved("{}", machine);
    CHECK(cfg.client_secret.empty());
    CHECK(cfg.redis_password.empty());
  }
  SECTION("the file, without its newline") {
    machine.files["/etc/redlockd/secret"] = "hunter2\n";
    const config cfg = resolved(R"({"client_secret_file": "/etc/redlockd/secret"})", machine);
    CHECK(cfg.client_secret == "hunter2");
  }
  SECTION("the environment when the key is not set") {
    machine.env["REDLOCKD_CLIENT_SECRET"] = "from-env";
    CHECK(resolved("{}", machine).client_secret == "from-env");
  }
  SECTION("the file wins over the environment") {
    machine.files["/s"] = "from-file";
    machine.env["REDLOCKD_CLIENT_SECRET"] = "from-env";
    CHECK(resolved(R"({"client_secret_file": "/s"})", machine).client_secret == "from-file");
  }
}

TEST_CASE("the admin secret comes from admin_secret_file, else from the environment",
          "[unit][auth][config]") {
  fake_machine machine;
  CHECK(resolved("{}", machine).admin_secret.empty());
  machine.env["REDLOCKD_ADMIN_SECRET"] = "admin-env";
  CHECK(resolved("{}", machine).admin_secret == "admin-env");
  machine.files["/a"] = "admin-file\n";
  CHECK(resolved(R"({"admin_secret_file": "/a"})", machine).admin_secret == "admin-file");
  CHECK(resolve_message(R"({"admin_secret_file": "/missing"})", machine) ==
        "admin_secret_file: cannot read '/missing'");
  machine.files["/spaced"] = "two words";
  CHECK(resolve_message(R"({"admin_secret_file": "/spaced"})", machine) ==
        "admin_secret_file: the secret must be printable ASCII without spaces or line breaks");
}

TEST_CASE("bad client secrets are config errors naming the key, never the secret",
          "[unit][auth][config]") {
  fake_machine machine;
  CHECK(resolve_message(R"({"client_secret_file": "/missing"})", machine) ==
        "client_secret_file: cannot read '/missing'");
  machine.files["/empty"] = "\n";
  CHECK(resolve_message(R"({"client_secret_file": "/empty"})", machine) ==
        "client_secret_file: '/empty' is empty");
  machine.files["/spaced"] = "two words\n";
  const std::string spaced = resolve_message(R"({"client_secret_file": "/spaced"})", machine);
  CHECK(spaced.starts_with("client_secret_file: "));
  CHECK(spaced.find("two words") == std::string::npos);
  machine.files["/long"] = std::string(5000, 'x');
  CHECK(resolve_message(R"({"client_secret_file": "/long"})", machine)
            .starts_with("client_secret_file: the secret is longer than an AUTH line"));
  machine.env["REDLOCKD_CLIENT_SECRET"] = "";
  CHECK(resolve_message("{}", machine) == "REDLOCKD_CLIENT_SECRET: is set but empty");
}

TEST_CASE("the Redis password comes from redis_password_file, else from the environment",
          "[unit][auth][config]") {
  fake_machine machine;
  machine.files["/redis-pass"] = "p@ss word\n"; // sent as a RESP bulk string: spaces are fine
  config cfg =
      resolved(R"({"redis_username": "redlockd", "redis_password_file": "/redis-pass"})", machine);
  CHECK(cfg.redis_username == "redlockd");
  CHECK(cfg.redis_password == "p@ss word");

  machine.env["REDLOCKD_REDIS_PASSWORD"] = "env-pass";
  CHECK(resolved("{}", machine).redis_password == "env-pass");
  CHECK(resolved(R"({"redis_password_file": "/redis-pass"})", machine).redis_password ==
        "p@ss word");

  fake_machine bare;
  CHECK(resolve_message(R"({"redis_username": "redlockd"})", bare) ==
        "redis_username: needs a password (redis_password_file or REDLOCKD_REDIS_PASSWORD)");
  CHECK(resolve_message(R"({"redis_password_file": "/nope"})", bare) ==
        "redis_password_file: cannot read '/nope'");
  bare.files["/empty"] = "";
  CHECK(resolve_message(R"({"redis_password_file": "/empty"})", bare) ==
        "redis_password_file: '/empty' is empty");
}

TEST_CASE("auth configuration keys: defaults, types and ranges", "[unit][auth][config]") {
  const config defaults = parse_config("{}");
  CHECK(defaults.max_auth_failures == 3);
  CHECK(defaults.auth_timeout_ms == 10000);
  CHECK(defaults.client_secret_file.empty());
  CHECK(defaults.redis_username.empty());
  CHECK(defaults.redis_password_file.empty());

  const config set = parse_config(R"({"max_auth_failures": 1, "auth_timeout_ms": 250})");
  CHECK(set.max_auth_failures == 1);
  CHECK(set.auth_timeout_ms == 250);

  CHECK(parse_message(R"({"max_auth_failures": 0})") ==
        "max_auth_failures: must be an integer between 1 and 1000");
  CHECK(parse_message(R"({"auth_timeout_ms": 99})") ==
        "auth_timeout_ms: must be an integer between 100 and 3600000");
  CHECK(parse_message(R"({"client_secret_file": 7})") == "client_secret_file: must be a string");
  CHECK(parse_message(R"({"redis_username": "a b"})") ==
        "redis_username: must be at most 256 printable ASCII bytes without spaces");
  // The secrets themselves are not keys: they never sit in a config file.
  CHECK(parse_message(R"({"client_secret": "x"})") == "unknown key 'client_secret'");
  CHECK(parse_message(R"({"redis_password": "x"})") == "unknown key 'redis_password'");
}

TEST_CASE("without AUTH only PING, HELLO, AUTH and QUIT pass", "[unit][auth]") {
  const request_limits limits;
  auto req = [&](std::string_view line) { return std::get<request>(parse_request(line, limits)); };
  connection_auth gate(true);
  CHECK(gate.allows(req("PING")));
  CHECK(gate.allows(req("HELLO")));
  CHECK(gate.allows(req("AUTH x")));
  CHECK(gate.allows(req("QUIT")));
  CHECK_FALSE(gate.allows(req("LOCK r 1000")));
  CHECK_FALSE(gate.allows(req("UNLOCK r 0123456789abcdef0123456789abcdef01234567")));
  CHECK_FALSE(gate.allows(req("EXTEND r 0123456789abcdef0123456789abcdef01234567 1000")));
  CHECK_FALSE(gate.allows(req("INFO")));

  CHECK(gate.attempt("secret", "secret", "", 3) == connection_auth::outcome::accepted);
  CHECK(gate.allows(req("LOCK r 1000")));
  CHECK(gate.allows(req("INFO")));

  connection_auth open(false);
  CHECK(open.allows(req("LOCK r 1000")));
  // No secret configured: AUTH answers OK whatever it carries.
  CHECK(open.attempt("anything", "", "", 3) == connection_auth::outcome::accepted);
}

TEST_CASE("the max_auth_failures-th refusal closes, an earlier success stays", "[unit][auth]") {
  connection_auth gate(true);
  CHECK(gate.attempt("a", "secret", "", 3) == connection_auth::outcome::refused);
  CHECK(gate.attempt("b", "secret", "", 3) == connection_auth::outcome::refused);
  CHECK_FALSE(gate.authenticated());
  CHECK(gate.attempt("c", "secret", "", 3) == connection_auth::outcome::refused_closing);
  CHECK(gate.failures() == 3);

  connection_auth once(true);
  CHECK(once.attempt("wrong", "secret", "", 1) == connection_auth::outcome::refused_closing);

  connection_auth in(true);
  CHECK(in.attempt("secret", "secret", "", 2) == connection_auth::outcome::accepted);
  CHECK(in.attempt("wrong", "secret", "", 2) == connection_auth::outcome::refused);
  CHECK(in.authenticated());
}

TEST_CASE("the admin secret authenticates and makes an admin, a client secret never does",
          "[unit][auth]") {
  connection_auth client(true);
  CHECK(client.attempt("secret", "secret", "admin", 3) == connection_auth::outcome::accepted);
  CHECK_FALSE(client.admin());

  connection_auth admin(true);
  CHECK(admin.attempt("admin", "secret", "admin", 3) == connection_auth::outcome::accepted);
  CHECK(admin.authenticated());
  CHECK(admin.admin());

  // Without a client secret every AUTH passes, but only the admin secret makes an admin.
  connection_auth open(false);
  CHECK(open.attempt("guess", "", "admin", 3) == connection_auth::outcome::accepted);
  CHECK_FALSE(open.admin());
  CHECK(open.attempt("admin", "", "admin", 3) == connection_auth::outcome::accepted);
  CHECK(open.admin());

  // No admin secret configured: nothing makes an admin, not even an empty candidate.
  connection_auth none(false);
  CHECK(none.attempt("", "", "", 3) == connection_auth::outcome::accepted);
  CHECK_FALSE(none.admin());
}

TEST_CASE("refused AUTH log lines are bounded per second and the rest counted", "[unit][auth]") {
  log_budget budget(3);
  const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  std::uint64_t held_back = 99;
  CHECK(budget.take(t0, held_back));
  CHECK(held_back == 0);
  CHECK(budget.take(t0, held_back));
  CHECK(budget.take(t0 + std::chrono::milliseconds(500), held_back));
  CHECK_FALSE(budget.take(t0 + std::chrono::milliseconds(600), held_back));
  CHECK_FALSE(budget.take(t0 + std::chrono::milliseconds(700), held_back));
  CHECK(budget.take(t0 + std::chrono::milliseconds(1000), held_back));
  CHECK(held_back == 2);
  CHECK(budget.take(t0 + std::chrono::milliseconds(1001), held_back));
  CHECK(held_back == 0);
}
