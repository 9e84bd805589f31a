// redlockctl against the real daemon: output, exit codes, and `run` supervising a command.
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_env.hpp"

using namespace redlockd::test;
using namespace std::chrono_literals;

namespace {

const std::string ctl = REDLOCKCTL_BINARY;

std::vector<std::string> with_addr(const daemon_process& daemon, std::vector<std::string> args) {
  args.insert(args.begin(), {"--addr", "127.0.0.1:" + std::to_string(daemon.port())});
  return args;
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    out.push_back(line);
  return out;
}

} // namespace

TEST_CASE("redlockctl lock, unlock, extend, ping and info with their exit codes",
          "[integration][redlockctl]") {
  fleet_and_daemon env;
  const auto locked = run_command(ctl, with_addr(env.daemon, {"lock", "job:1", "--ttl", "30s"}));
  CHECK(locked.status == 0);
  std::istringstream words(locked.out);
  std::string owner, fence, validity;
  words >> owner >> fence >> validity;
  CHECK(is_owner(owner));
  CHECK(std::stoull(fence) > 0);
  CHECK(std::stoll(validity) > 29000);
  CHECK(nodes_holding(env.fleet, "job:1", owner).size() >= 3);

  const auto busy = run_command(ctl, with_addr(env.daemon, {"lock", "job:1", "--ttl", "30s"}));
  CHECK(busy.status == 1);
  CHECK(busy.err.find("BUSY") != std::string::npos);

  const auto extended =
      run_command(ctl, with_addr(env.daemon, {"extend", "job:1", owner, "--ttl", "1m"}));
  CHECK(extended.status == 0);
  CHECK(std::stoll(extended.out) > 59000);

  CHECK(run_command(ctl, with_addr(env.daemon, {"unlock", "job:1", owner})).status == 0);
  CHECK(run_command(ctl, with_addr(env.daemon, {"unlock", "job:1", owner})).status == 3);
  CHECK(lock_keys(env.fleet).empty());

  const auto ping = run_command(ctl, with_addr(env.daemon, {"ping"}));
  CHECK(ping.status == 0);
  CHECK(ping.out == "PONG\n");
  const auto info = run_command(ctl, with_addr(env.daemon, {"info"}));
  CHECK(info.status == 0);
  CHECK(info.out.find("quorum 3") != std::string::npos);
  CHECK(info.out.find(env.fleet.address(0)) != std::string::npos);

  CHECK(run_command(ctl, with_addr(env.daemon, {"lock", "x", "--ttl", "5"})).status == 4);
  CHECK(run_command(ctl, with_addr(env.daemon, {"lock", "x"})).status == 64);
  CHECK(run_command(ctl, with_addr(env.daemon, {"lock", "x", "--ttl", "soon"})).status == 64);
  CHECK(run_command(ctl, {"--addr", "127.0.0.1:1", "ping"}).status == 5);
}

TEST_CASE("redlockctl run passes on the exit code and the lock's facts, then releases",
          "[integration][redlockctl]") {
  fleet_and_daemon env;
  temp_dir dir;
  const std::string out = dir.path().string() + "/env.txt";
  const auto result = run_command(
      ctl, with_addr(env.daemon, {"run", "job:2", "--ttl", "5s", "--", "sh", "-c",
                                  "env | grep ^REDLOCK_ | sort > " + out + "; exit 7"}));
  CHECK(result.status == 7);
  const auto env_lines = lines_of(out);
  REQUIRE(env_lines.size() == 4);
  CHECK(env_lines[0].rfind("REDLOCK_FENCE=", 0) == 0);
  CHECK(env_lines[1].size() == std::string("REDLOCK_OWNER=").size() + 40);
  CHECK(env_lines[2] == "REDLOCK_RESOURCE=job:2");
  CHECK(env_lines[3].rfind("REDLOCK_VALIDITY_MS=", 0) == 0);
  CHECK(lock_keys(env.fleet).empty()); // released on exit

  CHECK(run_command(ctl, with_addr(env.daemon, {"run", "job:2", "--", "/no/such/cmd"})).status ==
        127);
  CHECK(run_command(ctl, with_addr(env.daemon, {"run", "job:2"})).status == 64);
}

TEST_CASE("two redlockctl run on one resource never overlap", "[integration][redlockctl]") {
  fleet_and_daemon env;
  temp_dir dir;
  const std::string journal = dir.path().string() + "/journal.txt";
  const std::string body = "echo start $$ >> " + journal + "; sleep 0.3; echo end $$ >> " + journal;
  std::vector<child_process> runs;
  for (int i = 0; i < 3; ++i)
    runs.emplace_back(ctl,
                      with_addr(env.daemon, {"run", "shared", "--ttl", "5s", "--wait", "20s", "--",
                                             "sh", "-c", body}),
                      dir.path() / ("run" + std::to_string(i) + ".log"));
  for (auto& run : runs) {
    const auto status = run.wait_for(30s);
    REQUIRE(status);
    CHECK(*status == 0);
  }
  const auto lines = lines_of(journal);
  REQUIRE(lines.size() == 6);
  for (std::size_t i = 0; i < lines.size(); i += 2) {
    INFO("journal line " << i << ": " << lines[i] << " / " << lines[i + 1]);
    CHECK(lines[i].rfind("start ", 0) == 0);
    CHECK(lines[i + 1] == "end " + lines[i].substr(6)); // the same holder ends before the next
  }
}

TEST_CASE("redlockctl run kills the command when the lock is lost", "[integration][redlockctl]") {
  fleet_and_daemon env;
  temp_dir dir;
  const std::string pid_file = dir.path().string() + "/child.pid";
  child_process run(ctl,
                    with_addr(env.daemon, {"run", "doomed", "--ttl", "900ms", "--", "sh", "-c",
                                           "echo $$ > " + pid_file + "; exec sleep 30"}),
                    dir.path() / "run.log");
  REQUIRE(eventually([&] { return !lines_of(pid_file).empty(); }, 5s));
  const int child = std::stoi(lines_of(pid_file).front());
  env.fleet.kill(0);
  env.fleet.kill(1);
  env.fleet.kill(2);
  const auto status = run.wait_for(10s);
  REQUIRE(status);
  CHECK((*status == 128 + SIGTERM || *status == 128 + SIGKILL));
  CHECK(::kill(child, 0) == -1);                                              // the command is gone
  CHECK(read_file(dir.path() / "run.log").find("lost") != std::string::npos); // and says why
}
