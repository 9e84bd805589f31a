// redlockctl's command line: what parse_command_line reads from argv, and the usage errors.
#include "redlockd/ctl/command_line.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace redlockd::ctl;
using namespace std::chrono_literals;
using args = std::vector<std::string>;

namespace {

// The message of the usage_error the line is refused with; "" when it is accepted.
std::string refusal(const args& line) {
  try {
    parse_command_line(line);
  } catch (const usage_error& e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST_CASE("options may stand anywhere before the command's own arguments", "[command_line]") {
  const command_line line =
      parse_command_line({"--addr", "a:1,b:2", "lock", "--ttl=30s", "jobs", "-o", "json", "--wait",
                          "5s", "--timeout", "2s", "--secret-file", "s.txt"});
  CHECK(line.command == "lock");
  CHECK(line.positional == args{"jobs"});
  CHECK(line.tail.empty());
  CHECK(line.addr == "a:1,b:2");
  CHECK(line.ttl == "30s");
  CHECK(line.wait == "5s");
  CHECK(line.timeout == "2s");
  CHECK(line.secret_file == "s.txt");
  CHECK(line.output == "json");
  CHECK_FALSE(line.tls);
}

TEST_CASE("positionals in order, TLS files kept as written", "[command_line]") {
  const command_line line = parse_command_line(
      {"unlock", "jobs", "owner-1", "--cacert", "ca.pem", "--cert", "c.pem", "--key", "k.pem"});
  CHECK(line.command == "unlock");
  CHECK(line.positional == args{"jobs", "owner-1"});
  CHECK(line.output == "text");
  CHECK(line.cacert == "ca.pem");
  CHECK(line.cert == "c.pem");
  CHECK(line.key == "k.pem");
}

TEST_CASE("run's command is everything after the first --, untouched", "[command_line]") {
  const command_line line = parse_command_line(
      {"run", "jobs", "--tls", "--kill-after", "1s", "--", "sh", "-c", "--ttl", "--", "-h"});
  CHECK(line.command == "run");
  CHECK(line.positional == args{"jobs"});
  CHECK(line.tail == args{"sh", "-c", "--ttl", "--", "-h"});
  CHECK(line.tls);
  CHECK(line.kill_after == "1s");
  CHECK(line.ttl.empty()); // run's default TTL is applied later
}

TEST_CASE("-h wins over every other problem, --version over the command's", "[command_line]") {
  CHECK_THROWS_AS(parse_command_line({"bogus", "--ttl", "x", "-h"}), help_requested);
  CHECK_THROWS_AS(parse_command_line({"--help"}), help_requested);
  CHECK_THROWS_AS(parse_command_line({"--version"}), version_requested);
  CHECK_THROWS_AS(parse_command_line({"status", "--version"}), version_requested);
  // After "--", -h belongs to the command.
  CHECK_NOTHROW(parse_command_line({"run", "r", "--", "ls", "-h"}));
  CHECK(refusal({"--version", "--version"}) == "--version given more than once");
}

TEST_CASE("usage errors name the option or argument at fault", "[command_line]") {
  CHECK(refusal({}) ==
        "no command (one of lock, unlock, extend, status, list, break, info, ping, run)");
  CHECK(refusal({"frobnicate"}) == "unknown command 'frobnicate'");
  CHECK(refusal({"--bogus"}) == "unknown option --bogus");
  CHECK(refusal({"ping", "--bogus=1"}) == "unknown option --bogus");
  CHECK(refusal({"lock", "r", "--ttl", "1s", "--ttl", "2s"}) == "--ttl given more than once");
  CHECK(refusal({"lock", "r", "--ttl"}) == "--ttl needs a value");
  CHECK(refusal({"lock", "r"}) == "lock: --ttl is required");
  CHECK(refusal({"extend", "r", "o"}) == "extend: --ttl is required");
  CHECK(refusal({"unlock", "r"}) == "unlock: OWNER is missing");
  CHECK(refusal({"status", "r", "s"}) == "status: unexpected argument 's'");
  CHECK(refusal({"status", "r", "--wait", "1s"}) ==
        "status: --wait does not apply (it is for lock, run)");
  CHECK(refusal({"info", "-o", "yaml"}) == "--output: 'yaml' is not text or json");
  CHECK(refusal({"run", "r"}) == "run: give the command after --");
  CHECK(refusal({"run", "r", "--"}) == "run: no command after --");
  CHECK(refusal({"ping", "--", "x"}) == "ping: unexpected '--'");
  CHECK(refusal({"ping"}).empty());
  CHECK(refusal({"list", "--count", "0"}) == "--count: '0' is not a count (1 or more)");
  CHECK(refusal({"status", "r", "--count", "5"}) ==
        "status: --count does not apply (it is for list)");
  CHECK(refusal({"list", "a", "b"}) == "list: unexpected argument 'b'");
  CHECK(refusal({"break"}) == "break: RESOURCE is missing");
  CHECK(refusal({"lock", "r", "--ttl", "1s", "--admin-secret-file", "f"}) ==
        "lock: --admin-secret-file does not apply (it is for break)");
}

TEST_CASE("lock and run take several resources, unlock and extend several before the owner",
          "[command_line]") {
  const command_line one = parse_command_line({"lock", "jobs", "--ttl", "1s"});
  CHECK(one.resources == args{"jobs"});
  const command_line set =
      parse_command_line({"lock", "a", "--ttl", "1s", "b", "--wait=2s", "c", "-o", "json"});
  CHECK(set.positional == args{"a", "b", "c"});
  CHECK(set.resources == args{"a", "b", "c"});
  CHECK(set.wait == "2s");
  const command_line unlock = parse_command_line({"unlock", "a", "b", "owner-1"});
  CHECK(unlock.positional == args{"a", "b", "owner-1"});
  CHECK(unlock.resources == args{"a", "b"});
  const command_line extend = parse_command_line({"extend", "a", "owner-1", "--ttl", "1s"});
  CHECK(extend.resources == args{"a"});
  // run: the resources are the words before the first "--", the command those after it.
  const command_line run =
      parse_command_line({"run", "a", "--ttl", "5s", "b", "--", "sh", "-c", "b", "--", "c"});
  CHECK(run.resources == args{"a", "b"});
  CHECK(run.tail == args{"sh", "-c", "b", "--", "c"});
  CHECK(refusal({"lock", "--ttl", "1s"}) == "lock: RESOURCE is missing");
  CHECK(refusal({"run", "--", "true"}) == "run: RESOURCE is missing");
  CHECK(refusal({"extend", "--ttl", "1s"}) == "extend: RESOURCE is missing");
  CHECK(refusal({"lock", "a", "b", "a", "--ttl", "1s"}) == "lock: resource 'a' is named twice");
  CHECK(refusal({"unlock", "a", "a", "o"}) == "unlock: resource 'a' is named twice");
  CHECK(refusal({"lock", "a", "--bogus", "b", "--ttl", "1s"}) == "unknown option --bogus");
  CHECK(refusal({"status", "a", "b"}) == "status: unexpected argument 'b'");
}

TEST_CASE("lock and run take --shared or --permits N, with one resource, not both",
          "[command_line]") {
  const command_line shared = parse_command_line({"lock", "r", "--ttl", "1s", "--shared"});
  CHECK(shared.shared);
  CHECK(shared.permits == 0);
  const command_line permits = parse_command_line({"--permits=3", "run", "pool", "--", "true"});
  CHECK_FALSE(permits.shared);
  CHECK(permits.permits == 3);
  CHECK(parse_command_line({"lock", "r", "--ttl", "1s"}).permits == 0);
  CHECK_FALSE(parse_command_line({"lock", "r", "--ttl", "1s"}).shared);
  for (const char* bad : {"0", "-1", "x", "2x", ""})
    CHECK(refusal({"lock", "r", "--ttl", "1s", "--permits", bad}) ==
          std::string("--permits: '") + bad + "' is not a number of permits (1 or more)");
  CHECK(refusal({"lock", "r", "--ttl", "1s", "--shared", "--permits", "2"}) ==
        "lock: --shared and --permits exclude each other");
  CHECK(refusal({"lock", "a", "b", "--ttl", "1s", "--shared"}) ==
        "lock: --shared takes one resource (several resources are locked all or none, "
        "exclusively)");
  CHECK(refusal({"run", "a", "b", "--permits", "2", "--", "true"}) ==
        "run: --permits takes one resource (several resources are locked all or none, "
        "exclusively)");
  CHECK(refusal({"status", "r", "--shared"}) ==
        "status: --shared does not apply (it is for lock, run)");
  CHECK(refusal({"unlock", "r", "o", "--permits", "2"}) ==
        "unlock: --permits does not apply (it is for lock, run)");
  CHECK(refusal({"lock", "r", "--ttl", "1s", "--shared", "--shared"}) ==
        "--shared given more than once");
}

TEST_CASE("list takes an optional prefix and --count", "[command_line]") {
  const command_line all = parse_command_line({"list"});
  CHECK(all.command == "list");
  CHECK(all.positional.empty());
  CHECK(all.count == 0);
  const command_line some = parse_command_line({"list", "jobs/", "--count", "5"});
  CHECK(some.positional == std::vector<std::string>{"jobs/"});
  CHECK(some.count == 5);
  const command_line broken = parse_command_line({"break", "r", "--admin-secret-file", "/f"});
  CHECK(broken.admin_secret_file == "/f");
}

TEST_CASE("duration options need their unit", "[command_line]") {
  CHECK(duration_of("--ttl", "250ms") == 250ms);
  CHECK(duration_of("--ttl", "1m30s") == 90s);
  CHECK_THROWS_WITH(duration_of("--ttl", "30"),
                    "--ttl: '30' has no unit; write 30ms, 30s, 30m or 30h");
  CHECK_THROWS_WITH(duration_of("--ttl", "1.5"),
                    "--ttl: '1.5' has no unit; write 1.5ms, 1.5s, 1.5m or 1.5h");
  CHECK_THROWS_WITH(duration_of("--wait", "1d"), "--wait: bad duration '1d' (e.g. 250ms, 1.5s, "
                                                 "1m30s, 1h; whole milliseconds)");
}

TEST_CASE("run --conflict-exit-code takes an exit code, and only run takes it", "[command_line]") {
  CHECK(parse_command_line({"run", "r", "--", "true"}).conflict_exit_code == 1);
  CHECK(parse_command_line({"run", "r", "--conflict-exit-code", "75", "--", "true"})
            .conflict_exit_code == 75);
  CHECK(
      parse_command_line({"--conflict-exit-code=0", "run", "r", "--", "true"}).conflict_exit_code ==
      0);
  CHECK(parse_command_line({"run", "r", "--conflict-exit-code", "255", "--", "true"})
            .conflict_exit_code == 255);
  for (const char* bad : {"256", "-1", "x", "7x", ""})
    CHECK(refusal({"run", "r", "--conflict-exit-code", bad, "--", "true"}) ==
          std::string("--conflict-exit-code: '") + bad + "' is not an exit code (0 to 255)");
  CHECK(refusal({"lock", "r", "--ttl", "1s", "--conflict-exit-code", "3"}) ==
        "lock: --conflict-exit-code does not apply (it is for run)");
  CHECK(refusal({"run", "r", "--conflict-exit-code", "3", "--conflict-exit-code", "4", "--",
                 "true"}) == "--conflict-exit-code given more than once");
}

TEST_CASE("json output applies to every command", "[command_line]") {
  for (const args& line :
       {args{"unlock", "r", std::string(40, 'a')}, args{"ping"}, args{"info"}, args{"status", "r"},
        args{"lock", "r", "--ttl", "1s"}, args{"extend", "r", std::string(40, 'a'), "--ttl", "1s"},
        args{"run", "r", "--", "true"}}) {
    args with_json = {"-o", "json"};
    with_json.insert(with_json.end(), line.begin(), line.end());
    CHECK(parse_command_line(with_json).output == "json");
  }
}

TEST_CASE("address lists are split on commas, spaces trimmed, empty entries refused",
          "[command_line]") {
  CHECK(split_addresses("a:1", "--addr") == args{"a:1"});
  CHECK(split_addresses(" a:1 ,b:2", "--addr") == args{"a:1", "b:2"});
  CHECK_THROWS_WITH(split_addresses("a:1,,b:2", "REDLOCKD_ADDR"),
                    "REDLOCKD_ADDR: empty address in 'a:1,,b:2'");
  CHECK_THROWS_AS(split_addresses(" ", "--addr"), usage_error);
  CHECK_THROWS_AS(split_addresses("a:1,", "--addr"), usage_error);
}
