// redlockctl against the real daemon: output, exit codes, and `run` supervising a command.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <deque>
#include <fstream>
#include <mutex>
#include <poll.h>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
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

// Gone, or a zombie nobody of ours has to reap (after redlockctl itself was killed).
bool process_gone(int pid) {
  if (::kill(pid, 0) != 0)
    return true;
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

int pid_in(const std::string& path) {
  REQUIRE(eventually([&] { return !lines_of(path).empty() && !lines_of(path)[0].empty(); }, 10s));
  return std::stoi(lines_of(path).front());
}

// A scripted stand-in for redlockd on a free port: grants every LOCK, answers PING unless told to
// be silent, and pushes lines or drops the connection on demand, so that `run`'s reactions can be
// checked exactly, without waiting for a real fleet to fail.
class fake_daemon {
 public:
  fake_daemon() {
    const loopback_listener listener = listen_on_loopback(8);
    listen_fd_ = listener.fd;
    port_ = listener.port;
    thread_ = std::thread([this] { serve(); });
  }
  ~fake_daemon() {
    stop_ = true;
    thread_.join();
    if (conn_fd_ >= 0)
      ::close(conn_fd_);
    ::close(listen_fd_);
  }
  fake_daemon(const fake_daemon&) = delete;
  fake_daemon& operator=(const fake_daemon&) = delete;

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  void push(const std::string& line) {
    std::lock_guard lock(mutex_);
    outbox_.push_back(line + "\n");
  }
  void drop() { drop_ = true; }
  void set_silent(bool silent) { silent_ = silent; }
  std::vector<std::string> received() {
    std::lock_guard lock(mutex_);
    return received_;
  }
  bool received_verb(const std::string& verb) {
    for (const auto& line : received())
      if (line.rfind(verb, 0) == 0)
        return true;
    return false;
  }

 private:
  void serve() {
    std::string buffer;
    while (!stop_) {
      pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {conn_fd_, POLLIN, 0}};
      ::poll(fds, conn_fd_ >= 0 ? 2 : 1, 10);
      if ((fds[0].revents & POLLIN) && conn_fd_ < 0) {
        conn_fd_ = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        buffer.clear();
      }
      if (conn_fd_ < 0)
        continue;
      if (drop_.exchange(false)) {
        ::close(conn_fd_);
        conn_fd_ = -1;
        continue;
      }
      std::string out;
      {
        std::lock_guard lock(mutex_);
        for (const auto& line : outbox_)
          out += line;
        outbox_.clear();
      }
      if (fds[1].revents & (POLLIN | POLLHUP)) {
        char chunk[4096];
        const ssize_t n = ::recv(conn_fd_, chunk, sizeof chunk, 0);
        if (n <= 0) {
          ::close(conn_fd_);
          conn_fd_ = -1;
          continue;
        }
        buffer.append(chunk, static_cast<std::size_t>(n));
        for (auto lf = buffer.find('\n'); lf != std::string::npos; lf = buffer.find('\n')) {
          const std::string line = buffer.substr(0, lf);
          buffer.erase(0, lf + 1);
          {
            std::lock_guard lock(mutex_);
            received_.push_back(line);
          }
          out += answer(line);
        }
      }
      if (!out.empty()) [[maybe_unused]]
        const auto n = ::send(conn_fd_, out.data(), out.size(), MSG_NOSIGNAL);
    }
  }

  std::string answer(const std::string& line) {
    std::istringstream words(line);
    std::string verb, resource, ttl;
    words >> verb >> resource >> ttl;
    if (verb == "LOCK")
      return "OK " + std::string(40, 'a') + " 42 " + std::to_string(std::stoll(ttl) - 1) + "\n";
    if (verb == "MLOCK") { // MLOCK <n> <r1> .. <rn> <ttl> ...: a set's owner says its kind (3)
      std::istringstream set(line);
      std::string word;
      std::vector<std::string> all;
      while (set >> word)
        all.push_back(word);
      const auto n = static_cast<std::size_t>(std::stoul(all.at(1)));
      return "OK 00003000" + std::string(32, 'b') + " 43 " +
             std::to_string(std::stoll(all.at(n + 2)) - 1) + "\n";
    }
    if (verb == "PING")
      return silent_ ? "" : "PONG\n";
    if (verb == "UNLOCK" || verb == "MUNLOCK" || verb == "QUIT")
      return "OK\n";
    return "ERR UNKNOWN_COMMAND fake\n";
  }

  int listen_fd_ = -1;
  int conn_fd_ = -1; // one client at a time is all these tests need
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> drop_{false};
  std::atomic<bool> silent_{false};
  std::mutex mutex_;
  std::deque<std::string> outbox_;
  std::vector<std::string> received_;
  std::thread thread_;
};

std::vector<std::string> run_args(const fake_daemon& fake, const std::string& ttl,
                                  std::vector<std::string> tail,
                                  std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"--addr", fake.address(), "run", "res", "--ttl", ttl};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back("--");
  args.insert(args.end(), tail.begin(), tail.end());
  return args;
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

  CHECK(run_command(ctl, with_addr(env.daemon, {"lock", "x", "--ttl", "5ms"})).status == 4);
  CHECK(run_command(ctl, with_addr(env.daemon, {"lock", "x", "--ttl", "5"})).status == 64);
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
  REQUIRE(env_lines.size() == 5);
  CHECK(env_lines[0].rfind("REDLOCK_FENCE=", 0) == 0);
  CHECK(env_lines[1].size() == std::string("REDLOCK_OWNER=").size() + 40);
  CHECK(env_lines[2] == "REDLOCK_RESOURCE=job:2");
  CHECK(env_lines[3] == "REDLOCK_RESOURCES=job:2");
  CHECK(env_lines[4].rfind("REDLOCK_VALIDITY_MS=", 0) == 0);
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
  // No renewal can reach a quorum from now on, so the lease ends 900 ms from now at the latest:
  // after that another holder could get it. The command must be dead before. (The daemon gives
  // up with a third of the TTL left, and redlockctl kills the command at once.)
  const auto lease_end = std::chrono::steady_clock::now() + 900ms;
  while (!process_gone(child) && std::chrono::steady_clock::now() < lease_end + 10s)
    std::this_thread::sleep_for(1ms);
  const auto gone_at = std::chrono::steady_clock::now();
  INFO("the command died "
       << std::chrono::duration_cast<std::chrono::milliseconds>(lease_end - gone_at).count()
       << " ms before the lease could end at the latest");
  CHECK(process_gone(child));
  CHECK(gone_at < lease_end);
  const auto status = run.wait_for(10s);
  REQUIRE(status);
  CHECK((*status == 128 + SIGTERM || *status == 128 + SIGKILL));
  CHECK(read_file(dir.path() / "run.log").find("lost") != std::string::npos); // and says why
}

TEST_CASE("redlockctl run kills the command when the daemon dies", "[integration][redlockctl]") {
  fleet_and_daemon env;
  temp_dir dir;
  const std::string pid_file = dir.path().string() + "/child.pid";
  child_process run(ctl,
                    with_addr(env.daemon, {"run", "orphaned", "--ttl", "3s", "--", "sh", "-c",
                                           "echo $$ > " + pid_file + "; exec sleep 30"}),
                    dir.path() / "run.log");
  const int child = pid_in(pid_file);
  env.daemon.kill();
  const auto status = run.wait_for(10s);
  REQUIRE(status);
  CHECK((*status == 128 + SIGTERM || *status == 128 + SIGKILL));
  CHECK(process_gone(child));
  CHECK(read_file(dir.path() / "run.log").find("lost") != std::string::npos);
}

// The rest drive `run` against a scripted daemon, to check each reaction on its own.

TEST_CASE("run: LOST stops the command's whole group and skips UNLOCK",
          "[integration][redlockctl]") {
  fake_daemon fake;
  temp_dir dir;
  const std::string leader = dir.path().string() + "/leader.pid";
  const std::string member = dir.path().string() + "/member.pid";
  child_process run(
      ctl,
      run_args(fake, "10s",
               {"sh", "-c", "sleep 30 & echo $! > " + member + "; echo $$ > " + leader + "; wait"}),
      dir.path() / "run.log");
  const int leader_pid = pid_in(leader);
  const int member_pid = pid_in(member);
  fake.push("LOST res " + std::string(40, 'a'));
  const auto status = run.wait_for(10s);
  REQUIRE(status);
  CHECK(*status == 128 + SIGTERM);
  CHECK(process_gone(leader_pid));
  CHECK(process_gone(member_pid)); // SIGTERM went to the group, not just the leader
  CHECK(read_file(dir.path() / "run.log").find("lost") != std::string::npos);
  CHECK_FALSE(fake.received_verb("UNLOCK")); // the lock is not ours any more
  CHECK(fake.received_verb("LOCK res 10000 KEEP"));
}

TEST_CASE("run: a command that ignores SIGTERM gets SIGKILL after --kill-after",
          "[integration][redlockctl]") {
  fake_daemon fake;
  temp_dir dir;
  const std::string leader = dir.path().string() + "/leader.pid";
  child_process run(
      ctl,
      run_args(fake, "10s",
               {"sh", "-c", "trap '' TERM; echo $$ > " + leader + "; while :; do sleep 0.05; done"},
               {"--kill-after", "400ms"}),
      dir.path() / "run.log");
  const int leader_pid = pid_in(leader);
  const auto lost_at = std::chrono::steady_clock::now();
  fake.push("LOST res " + std::string(40, 'a'));
  const auto status = run.wait_for(10s);
  REQUIRE(status);
  CHECK(*status == 128 + SIGKILL);
  // SIGKILL only once the grace ran out (a lower bound, not a speed).
  CHECK(std::chrono::steady_clock::now() - lost_at >= 400ms);
  CHECK(process_gone(leader_pid));
}

TEST_CASE("run: a dropped connection stops the command", "[integration][redlockctl]") {
  fake_daemon fake;
  temp_dir dir;
  const std::string leader = dir.path().string() + "/leader.pid";
  child_process run(ctl,
                    run_args(fake, "10s", {"sh", "-c", "echo $$ > " + leader + "; exec sleep 30"}),
                    dir.path() / "run.log");
  const int leader_pid = pid_in(leader);
  fake.drop();
  const auto status = run.wait_for(10s);
  REQUIRE(status);
  CHECK(*status == 128 + SIGTERM);
  CHECK(process_gone(leader_pid));
  CHECK(read_file(dir.path() / "run.log").find("closed the connection") != std::string::npos);
}

TEST_CASE("run: a daemon that stops answering PING is taken as lost", "[integration][redlockctl]") {
  fake_daemon fake;
  temp_dir dir;
  const std::string leader = dir.path().string() + "/leader.pid";
  child_process run(
      ctl, run_args(fake, "800ms", {"sh", "-c", "echo $$ > " + leader + "; exec sleep 30"}),
      dir.path() / "run.log");
  const int leader_pid = pid_in(leader);
  REQUIRE(eventually([&] { return fake.received_verb("PING"); }, 10s)); // the heartbeat runs
  CHECK(run.running());
  fake.set_silent(true);
  const auto status = run.wait_for(10s);
  REQUIRE(status);
  CHECK(*status == 128 + SIGTERM);
  CHECK(process_gone(leader_pid));
  CHECK(read_file(dir.path() / "run.log").find("did not answer a PING") != std::string::npos);
}

TEST_CASE("run: processes the command leaves behind are stopped before UNLOCK",
          "[integration][redlockctl]") {
  fake_daemon fake;
  temp_dir dir;
  const std::string member = dir.path().string() + "/member.pid";
  const auto status = run_command(
      ctl, run_args(fake, "10s", {"sh", "-c", "sleep 30 & echo $! > " + member + "; exit 3"}), 20s);
  CHECK(status.status == 3);
  const int member_pid = pid_in(member);
  CHECK(process_gone(member_pid));
  CHECK(fake.received_verb("UNLOCK res " + std::string(40, 'a')));
  CHECK(status.err.find("left processes") != std::string::npos);
}

TEST_CASE("run: SIGTERM to redlockctl goes to the command, which ends it - then UNLOCK",
          "[integration][redlockctl]") {
  fake_daemon fake;
  temp_dir dir;
  const std::string leader = dir.path().string() + "/leader.pid";
  child_process run(ctl,
                    run_args(fake, "10s", {"sh", "-c", "echo $$ > " + leader + "; exec sleep 30"}),
                    dir.path() / "run.log");
  const int leader_pid = pid_in(leader);
  run.signal(SIGTERM); // redlockctl's own group: the command is in another one
  const auto status = run.wait_for(10s);
  REQUIRE(status);
  CHECK(*status == 128 + SIGTERM);
  CHECK(process_gone(leader_pid));
  CHECK(fake.received_verb("UNLOCK res"));
}

TEST_CASE("run: the command dies with redlockctl", "[integration][redlockctl]") {
  fake_daemon fake;
  temp_dir dir;
  const std::string leader = dir.path().string() + "/leader.pid";
  child_process run(ctl,
                    run_args(fake, "10s", {"sh", "-c", "echo $$ > " + leader + "; exec sleep 30"}),
                    dir.path() / "run.log");
  const int leader_pid = pid_in(leader);
  run.kill(); // SIGKILL: no chance to clean up, the kernel must do it
  CHECK(eventually([&] { return process_gone(leader_pid); }, 5s));
}

TEST_CASE("run: exit codes before the command runs", "[integration][redlockctl]") {
  fleet_and_daemon env;
  const auto held = run_command(ctl, with_addr(env.daemon, {"lock", "taken", "--ttl", "30s"}));
  REQUIRE(held.status == 0);
  const auto busy =
      run_command(ctl, with_addr(env.daemon, {"run", "taken", "--wait", "100ms", "--", "true"}));
  CHECK(busy.status == 1);
  CHECK(busy.err.find("BUSY") != std::string::npos);
  CHECK(run_command(ctl, with_addr(env.daemon, {"run", "taken", "--ttl", "5ms", "--", "true"}))
            .status == 125); // ERR BAD_TTL
  CHECK(run_command(ctl, {"--addr", "127.0.0.1:1", "run", "x", "--", "true"}).status == 125);
  CHECK(run_command(ctl, with_addr(env.daemon, {"run", "free", "--", "/dev/null"})).status == 126);
  env.fleet.kill(0);
  env.fleet.kill(1);
  env.fleet.kill(2);
  const auto no_quorum = run_command(ctl, with_addr(env.daemon, {"run", "free", "--", "true"}));
  CHECK(no_quorum.status == 2);
  CHECK(no_quorum.err.find("NOQUORUM") != std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// The command line: parsing, usage errors, addresses, output formats, STATUS.

namespace {

// Exit code 64 and a message on stderr that says what is wrong; nothing is sent anywhere (the
// address is one nobody listens on, so a line that got past parsing would exit 5 instead).
void check_usage_error(const std::vector<std::string>& args, const std::string& message) {
  const auto result = run_command("/usr/bin/env", [&] {
    std::vector<std::string> all{"REDLOCKD_ADDR=127.0.0.1:1", ctl};
    all.insert(all.end(), args.begin(), args.end());
    return all;
  }());
  INFO("args: " << nlohmann::json(args).dump() << "\nstderr: " << result.err);
  CHECK(result.status == 64);
  CHECK(result.err.find(message) != std::string::npos);
  CHECK(result.out.empty());
}

} // namespace

TEST_CASE("redlockctl refuses wrong usage with exit 64 and says why",
          "[integration][redlockctl][usage]") {
  check_usage_error({"--bogus", "ping"}, "unknown option --bogus");
  check_usage_error({"ping", "--bogus=1"}, "unknown option --bogus");
  check_usage_error({"lock", "x", "--ttl", "1s", "-z"}, "unknown option -z");
  check_usage_error({"lock", "x", "--ttl", "1s", "--ttl", "2s"}, "--ttl given more than once");
  check_usage_error({"lock", "x", "--ttl=1s", "--ttl=2s"}, "--ttl given more than once");
  check_usage_error({"--tls", "--tls", "ping"}, "--tls given more than once");
  check_usage_error({"--addr", "a:1", "ping", "--addr", "b:2"}, "--addr given more than once");
  check_usage_error({"lock", "x", "--ttl", "30"}, "--ttl: '30' has no unit; write 30ms, 30s");
  check_usage_error({"lock", "x", "--ttl", "30s", "--wait", "5"}, "--wait: '5' has no unit");
  check_usage_error({"--timeout", "5", "ping"}, "--timeout: '5' has no unit");
  check_usage_error({"run", "x", "--kill-after", "100", "--", "true"},
                    "--kill-after: '100' has no unit");
  check_usage_error({"lock", "x", "--ttl", "soon"}, "--ttl: bad duration 'soon'");
  check_usage_error({"lock"}, "lock: RESOURCE is missing");
  check_usage_error({"unlock", "x"}, "unlock: OWNER is missing");
  check_usage_error({"lock", "x"}, "lock: --ttl is required");
  check_usage_error({"extend", "x", std::string(40, 'a')}, "extend: --ttl is required");
  check_usage_error({"lock", "x", "--ttl"}, "--ttl needs a value");
  check_usage_error({"ping", "extra"}, "ping: unexpected argument 'extra'");
  check_usage_error({"frobnicate"}, "unknown command 'frobnicate'");
  check_usage_error({}, "no command");
  check_usage_error({"ping", "--ttl", "1s"}, "ping: --ttl does not apply");
  check_usage_error({"lock", "x", "--ttl", "1s", "--conflict-exit-code", "3"},
                    "lock: --conflict-exit-code does not apply");
  check_usage_error({"run", "x", "--conflict-exit-code", "256", "--", "true"},
                    "--conflict-exit-code: '256' is not an exit code (0 to 255)");
  check_usage_error({"lock", "x", "--ttl", "30s1m"}, "--ttl: bad duration '30s1m'");
  check_usage_error({"lock", "x", "--ttl", "1.5"}, "--ttl: '1.5' has no unit");
  check_usage_error({"-o", "yaml", "info"}, "--output: 'yaml' is not text or json");
  check_usage_error({"run", "x"}, "run: give the command after --");
  check_usage_error({"ping", "--", "true"}, "ping: unexpected '--'");
  check_usage_error({"--addr", "127.0.0.1:1,,127.0.0.1:2", "ping"}, "--addr: empty address");

  const auto version = run_command(ctl, {"--version"});
  CHECK(version.status == 0);
  CHECK(version.out == std::string("redlockctl ") + REDLOCKD_VERSION + "\n");
  for (const std::vector<std::string>& help :
       {std::vector<std::string>{"--help"}, {"lock", "-h"}, {"--bogus", "--help"}}) {
    const auto shown = run_command(ctl, help);
    CHECK(shown.status == 0);
    CHECK(shown.out.find("exit codes:") != std::string::npos);
    CHECK(shown.out.find("status RESOURCE") != std::string::npos);
  }
}

TEST_CASE("redlockctl takes options anywhere, also as --name=value",
          "[integration][redlockctl][usage]") {
  fleet_and_daemon env;
  const std::string addr = "127.0.0.1:" + std::to_string(env.daemon.port());
  const auto after = run_command(ctl, {"lock", "anywhere", "--ttl=30s", "--addr=" + addr});
  REQUIRE(after.status == 0);
  const auto owner = after.out.substr(0, after.out.find(' '));
  CHECK(is_owner(owner));
  const auto before =
      run_command(ctl, {"--ttl", "1m", "--addr", addr, "extend", "anywhere", owner});
  CHECK(before.status == 0);
  CHECK(std::stoll(before.out) > 59000);
  CHECK(run_command(ctl, {"unlock", "--timeout=2s", "anywhere", owner, "--addr", addr}).status ==
        0);
  CHECK(lock_keys(env.fleet).empty());
}

TEST_CASE("redlockctl fails over to the next address when one cannot be reached",
          "[integration][redlockctl]") {
  fleet_and_daemon env;
  const std::string live = "127.0.0.1:" + std::to_string(env.daemon.port());
  const std::string dead = "127.0.0.1:1"; // nothing listens on port 1

  const auto ping = run_command(ctl, {"--addr", dead + "," + live, "ping"});
  CHECK(ping.status == 0);
  CHECK(ping.out == "PONG\n");
  CHECK(ping.err.find("cannot connect to " + dead) != std::string::npos);
  CHECK(ping.err.find("trying the next address") != std::string::npos);

  const auto from_env = run_command(
      "/usr/bin/env", {"REDLOCKD_ADDR=" + dead + ", " + live, ctl, "lock", "fo", "--ttl", "30s"});
  CHECK(from_env.status == 0);
  CHECK(nodes_holding(env.fleet, "fo", from_env.out.substr(0, 40)).size() >= 3);

  const auto run = run_command(ctl, {"--addr", dead + "," + live, "run", "fo-run", "--ttl", "5s",
                                     "--", "sh", "-c", "test -n \"$REDLOCK_FENCE\""});
  CHECK(run.status == 0);

  const auto none = run_command(ctl, {"--addr", dead + ",127.0.0.1:2", "ping"});
  CHECK(none.status == 5);
  CHECK(none.err.find("no daemon reachable at 2 addresses") != std::string::npos);
  CHECK(none.err.find("cannot connect to 127.0.0.1:2") != std::string::npos);
}

TEST_CASE("redlockctl -o json on lock, extend, status and info", "[integration][redlockctl]") {
  fleet_and_daemon env;
  const auto lock =
      run_command(ctl, with_addr(env.daemon, {"-o", "json", "lock", "js", "--ttl", "30s"}));
  REQUIRE(lock.status == 0);
  const auto granted = nlohmann::json::parse(lock.out);
  CHECK(granted["resource"] == "js");
  REQUIRE(granted["owner"].is_string());
  const std::string owner = granted["owner"];
  CHECK(is_owner(owner));
  CHECK(granted["fence"].is_number_unsigned());
  CHECK(granted["fence"].get<std::uint64_t>() > 0);
  CHECK(granted["validity_ms"].get<std::int64_t>() > 29000);

  const auto extend = run_command(
      ctl, with_addr(env.daemon, {"extend", "js", owner, "--ttl", "1m", "--output=json"}));
  REQUIRE(extend.status == 0);
  CHECK(nlohmann::json::parse(extend.out)["validity_ms"].get<std::int64_t>() > 59000);

  const auto held = run_command(ctl, with_addr(env.daemon, {"status", "js", "-o", "json"}));
  REQUIRE(held.status == 0);
  const auto status = nlohmann::json::parse(held.out);
  CHECK(status["resource"] == "js");
  CHECK(status["state"] == "held");
  CHECK(status["pttl_ms"].get<std::int64_t>() > 50000);
  CHECK(status["pttl_ms"].get<std::int64_t>() <= 60000);
  CHECK(status.dump().find(owner) == std::string::npos); // never the owner

  const auto free = run_command(ctl, with_addr(env.daemon, {"status", "nobody", "-o", "json"}));
  REQUIRE(free.status == 0);
  CHECK(nlohmann::json::parse(free.out) ==
        nlohmann::json{{"resource", "nobody"}, {"state", "free"}});

  const auto info = run_command(ctl, with_addr(env.daemon, {"info", "-o", "json"}));
  REQUIRE(info.status == 0);
  const auto doc = nlohmann::json::parse(info.out);
  CHECK(doc["quorum"] == 3);
  CHECK(doc["nodes"].size() == 5);
}

TEST_CASE("redlockctl -o json on unlock, ping and run", "[integration][redlockctl]") {
  fleet_and_daemon env;
  const auto lock = run_command(ctl, with_addr(env.daemon, {"lock", "js2", "--ttl", "30s"}));
  REQUIRE(lock.status == 0);
  const std::string owner = lock.out.substr(0, 40);
  const auto unlock =
      run_command(ctl, with_addr(env.daemon, {"-o", "json", "unlock", "js2", owner}));
  CHECK(unlock.status == 0);
  CHECK(nlohmann::json::parse(unlock.out) ==
        nlohmann::json{{"resource", "js2"}, {"released", true}});
  const auto ping = run_command(ctl, with_addr(env.daemon, {"ping", "-o", "json"}));
  CHECK(ping.status == 0);
  CHECK(nlohmann::json::parse(ping.out) == nlohmann::json{{"reply", "PONG"}});

  // run: the command's own output first, then one JSON line about the lock and the exit.
  const auto run = run_command(ctl, with_addr(env.daemon, {"run", "js3", "-o", "json", "--", "sh",
                                                           "-c", "echo from-the-command; exit 3"}));
  CHECK(run.status == 3);
  const auto newline = run.out.find('\n');
  REQUIRE(newline != std::string::npos);
  CHECK(run.out.substr(0, newline) == "from-the-command");
  const auto result = nlohmann::json::parse(run.out.substr(newline + 1));
  CHECK(result["resource"] == "js3");
  CHECK(result["exit_code"] == 3);
  CHECK(result["lost"] == false);
  CHECK(result["fence"].get<std::uint64_t>() > 0);
  CHECK(lock_keys(env.fleet).empty());
}

TEST_CASE("run --conflict-exit-code tells a held lock from the command's own exit 1",
          "[integration][redlockctl]") {
  fleet_and_daemon env;
  REQUIRE(run_command(ctl, with_addr(env.daemon, {"lock", "cx", "--ttl", "30s"})).status == 0);
  // Without the option both exit 1: a busy lock and a command that fails.
  CHECK(run_command(ctl, with_addr(env.daemon, {"run", "cx", "--", "true"})).status == 1);
  CHECK(run_command(ctl, with_addr(env.daemon, {"run", "free", "--", "false"})).status == 1);
  // With it, the busy lock says so by its own code; the command's exit 1 stays 1.
  const auto busy = run_command(
      ctl, with_addr(env.daemon, {"run", "cx", "--conflict-exit-code", "75", "--", "true"}));
  CHECK(busy.status == 75);
  CHECK(busy.err.find("BUSY") != std::string::npos);
  const auto waited =
      run_command(ctl, with_addr(env.daemon, {"run", "cx", "--wait", "200ms",
                                              "--conflict-exit-code=75", "--", "true"}));
  CHECK(waited.status == 75);
  CHECK(run_command(ctl, with_addr(env.daemon,
                                   {"run", "free", "--conflict-exit-code", "75", "--", "false"}))
            .status == 1);
}

TEST_CASE("redlockctl durations with fractions and several units", "[integration][redlockctl]") {
  fleet_and_daemon env;
  const auto short_lock =
      run_command(ctl, with_addr(env.daemon, {"-o", "json", "lock", "d1", "--ttl", "1.5s"}));
  REQUIRE(short_lock.status == 0);
  const auto validity = nlohmann::json::parse(short_lock.out)["validity_ms"].get<std::int64_t>();
  CHECK(validity > 1000); // 1.5 s less the drift allowance and the round trip
  CHECK(validity <= 1500);
  const auto long_lock =
      run_command(ctl, with_addr(env.daemon, {"-o", "json", "lock", "d2", "--ttl", "1m30s"}));
  REQUIRE(long_lock.status == 0);
  const auto long_validity =
      nlohmann::json::parse(long_lock.out)["validity_ms"].get<std::int64_t>();
  CHECK(long_validity > 60000);
  CHECK(long_validity <= 90000);
  const std::string owner = nlohmann::json::parse(long_lock.out)["owner"];
  const auto extended =
      run_command(ctl, with_addr(env.daemon, {"extend", "d2", owner, "--ttl", "2m0.5s"}));
  REQUIRE(extended.status == 0);
  CHECK(std::stoll(extended.out) > 90000);
  CHECK(std::stoll(extended.out) <= 120500);
}

// A waiter that outlasts max_ttl_ms (the longest WAIT the daemon takes in one request): the holder
// keeps its lock longer than that (KEEP), and the waiter still gets it once it is released.
TEST_CASE("lock and run --wait longer than max_ttl_ms keep waiting", "[integration][redlockctl]") {
  fleet_and_daemon env(nlohmann::json{{"max_ttl_ms", 1000}});
  temp_dir dir;
  for (const bool use_run : {false, true}) {
    INFO((use_run ? "run" : "lock"));
    line_client holder(env.daemon.port());
    const auto grant = parse_lock_ok(holder.request("LOCK lw 1000 KEEP"));
    REQUIRE(grant);
    const auto busy_before = env.daemon.info()["counters"]["busy"].get<std::int64_t>();
    std::vector<std::string> args =
        use_run ? with_addr(env.daemon, {"run", "lw", "--ttl", "1s", "--wait", "20s", "--", "true"})
                : with_addr(env.daemon, {"lock", "lw", "--ttl", "1s", "--wait", "20s"});
    child_process waiter(ctl, args, dir.path() / (use_run ? "run.log" : "lock.log"));
    // The first WAIT the daemon accepted ran out with the lock still held: redlockctl is past
    // max_ttl_ms and waits on.
    REQUIRE(eventually(
        [&] { return env.daemon.info()["counters"]["busy"].get<std::int64_t>() > busy_before; },
        20s));
    REQUIRE(eventually([&] { return env.daemon.info()["waiters"] == 1; }, 10s));
    CHECK(holder.request("UNLOCK lw " + grant->owner) == "OK");
    const auto status = waiter.wait_for(20s);
    INFO(read_file(dir.path() / (use_run ? "run.log" : "lock.log")));
    CHECK(status == 0);
    CHECK(eventually([&] { return lock_keys(env.fleet).empty(); }, 5s)); // 1 s TTL, or released
  }
}

TEST_CASE("redlockctl status reads a majority of the masters",
          "[integration][redlockctl][status]") {
  fleet_and_daemon env;
  CHECK(run_command(ctl, with_addr(env.daemon, {"status", "st"})).out == "free\n");

  const auto lock = run_command(ctl, with_addr(env.daemon, {"lock", "st", "--ttl", "30s"}));
  REQUIRE(lock.status == 0);
  const auto held = run_command(ctl, with_addr(env.daemon, {"status", "st"}));
  CHECK(held.status == 0);
  REQUIRE(held.out.starts_with("held "));
  const auto left = std::stoll(held.out.substr(5));
  CHECK(left > 20000);
  CHECK(left <= 30000);

  // The key on two masters only (a lock that failed or is lapsing): a LOCK could succeed.
  REQUIRE(env.fleet.set_nx_px(0, "two", std::string(40, 'b'), 30000));
  REQUIRE(env.fleet.set_nx_px(1, "two", std::string(40, 'b'), 30000));
  CHECK(run_command(ctl, with_addr(env.daemon, {"status", "two"})).out == "free\n");
  // On three, with different TTLs: held, for the third largest at most.
  REQUIRE(env.fleet.set_nx_px(2, "two", std::string(40, 'b'), 10000));
  const auto three = run_command(ctl, with_addr(env.daemon, {"status", "two"}));
  REQUIRE(three.out.starts_with("held "));
  CHECK(std::stoll(three.out.substr(5)) <= 10000);
  CHECK(std::stoll(three.out.substr(5)) > 5000);

  // Through the protocol: the reply never carries the owner.
  auto client = env.client();
  CHECK(client.request("STATUS st").starts_with("OK HELD "));
  CHECK(client.request("STATUS free-one") == "OK FREE");
  CHECK(client.request("STATUS") == "ERR SYNTAX wrong number of arguments for 'STATUS'");
  CHECK(client.request("STATUS a b").starts_with("ERR SYNTAX"));

  // Two masters down: three still answer, the verdict stands.
  env.fleet.kill(3);
  env.fleet.kill(4);
  CHECK(eventually([&] {
    return run_command(ctl, with_addr(env.daemon, {"status", "st"})).out.starts_with("held ");
  }));
  // Three down: no majority answers.
  env.fleet.kill(2);
  REQUIRE(eventually([&] {
    return run_command(ctl, with_addr(env.daemon, {"status", "st"})).status == 2;
  }));
  const auto no_quorum = run_command(ctl, with_addr(env.daemon, {"status", "st"}));
  CHECK(no_quorum.err.find("NOQUORUM") != std::string::npos);
  CHECK(no_quorum.out.empty());
}

TEST_CASE("redlockctl's bash completion completes commands, options and their values",
          "[integration][redlockctl][usage]") {
  // What bash offers for the words typed so far (the last one being completed).
  auto complete = [](const std::string& typed) {
    const auto result =
        run_command("/bin/bash",
                    {"-c",
                     "source \"$0\" || exit 9; read -ra COMP_WORDS <<< \"$1\"; [[ $1 == *' ' ]] && "
                     "COMP_WORDS+=(''); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _redlockctl; "
                     "printf '%s\\n' \"${COMPREPLY[@]}\"",
                     REDLOCKCTL_COMPLETION, typed});
    INFO("typed: " << typed << "\nstderr: " << result.err);
    REQUIRE(result.status == 0);
    return result.out;
  };
  CHECK(complete("redlockctl st") == "status\n");
  CHECK(complete("redlockctl -o ") == "text\njson\n");
  CHECK(complete("redlockctl status x --o") == "--output\n");
  const auto lock_options = complete("redlockctl lock x --");
  CHECK(lock_options.find("--ttl\n") != std::string::npos);
  CHECK(lock_options.find("--wait\n") != std::string::npos);
  CHECK(lock_options.find("--kill-after") == std::string::npos); // run's only
  CHECK(complete("redlockctl run x --ki") == "--kill-after\n");
  CHECK(complete("redlockctl lock a b --sh") == "--shared\n");
  CHECK(complete("redlockctl run a --per") == "--permits\n");
  CHECK(complete("redlockctl lock a --permits ").find("3\n") != std::string::npos);
  CHECK(complete("redlockctl status a --sh") == "\n"); // lock's and run's only: nothing
}

TEST_CASE("status does not count masters in quarantine", "[integration][redlockctl][status]") {
  // Three of five masters restart empty while a lock is held: they would say "no key". Only the
  // two that kept the key count, which is no majority either way. The daemon without quarantine
  // counts the empty ones and calls the lock free: proof that the check can fail.
  for (const bool quarantine : {true, false}) {
    INFO("quarantine " << (quarantine ? "on" : "off"));
    fleet_and_daemon env(quarantine ? nlohmann::json::object()
                                    : nlohmann::json{{"unsafe_disable_quarantine", true}});
    REQUIRE(run_command(ctl, with_addr(env.daemon, {"lock", "q", "--ttl", "30s"})).status == 0);
    for (std::size_t i = 0; i < 3; ++i) {
      env.fleet.kill(i);
      env.fleet.restart(i);
    }
    REQUIRE(eventually([&] {
      const auto info = env.daemon.info();
      return count_nodes_in_state(info, env.fleet.addresses(), "down") == 0 &&
             count_nodes_in_state(info, env.fleet.addresses(), "connecting") == 0;
    }));
    const auto status = run_command(ctl, with_addr(env.daemon, {"status", "q"}));
    INFO("stdout: " << status.out << "stderr: " << status.err);
    if (quarantine) {
      CHECK(status.status == 2);
      CHECK(status.err.find("NOQUORUM 2 3") != std::string::npos);
    } else {
      CHECK(status.status == 0);
      CHECK(status.out == "free\n");
    }
  }
}

// The lock family (protocol 1.1) through redlockctl. The requests are checked on the scripted
// daemon; what they do on the real one below, which must say proto=1.1.

TEST_CASE("run with several resources sends MLOCK and MUNLOCK, and --shared and --permits",
          "[integration][redlockctl]") {
  temp_dir dir;
  const std::string out = dir.path().string() + "/env.txt";
  {
    fake_daemon fake;
    const auto result = run_command(
        ctl, {"--addr", fake.address(), "run", "acct:1", "--ttl", "5s", "acct:2", "-o", "json",
              "--", "sh", "-c", "echo \"$REDLOCK_RESOURCE|$REDLOCK_RESOURCES\" > " + out});
    CHECK(result.status == 0);
    CHECK(lines_of(out) == std::vector<std::string>{"acct:1|acct:1 acct:2"});
    CHECK(fake.received_verb("MLOCK 2 acct:1 acct:2 5000 KEEP"));
    CHECK(fake.received_verb("MUNLOCK 2 acct:1 acct:2 00003000" + std::string(32, 'b')));
    CHECK_FALSE(fake.received_verb("UNLOCK"));
    const auto last = nlohmann::json::parse(result.out);
    CHECK(last["resource"] == "acct:1");
    CHECK(last["resources"] == nlohmann::json{"acct:1", "acct:2"});
    CHECK(last["fence"] == 43);
  }
  {
    fake_daemon fake;
    CHECK(run_command(ctl, run_args(fake, "5s", {"true"}, {"--permits", "3", "--wait", "1s"}))
              .status == 0);
    CHECK(fake.received_verb("LOCK res 5000 PERMITS 3 WAIT 1000 KEEP"));
    CHECK(fake.received_verb("UNLOCK res " + std::string(40, 'a')));
  }
  {
    fake_daemon fake;
    CHECK(run_command(ctl, run_args(fake, "5s", {"true"}, {"--shared"})).status == 0);
    CHECK(fake.received_verb("LOCK res 5000 SHARED KEEP"));
  }
  // A set LOST names its first resource; run stops the command as for one lock.
  {
    fake_daemon fake;
    const std::string leader = dir.path().string() + "/leader.pid";
    child_process run(ctl,
                      {"--addr", fake.address(), "run", "s:1", "s:2", "--ttl", "10s", "--", "sh",
                       "-c", "echo $$ > " + leader + "; exec sleep 30"},
                      dir.path() / "run.log");
    const int leader_pid = pid_in(leader);
    fake.push("LOST s:1 00003000" + std::string(32, 'b'));
    const auto status = run.wait_for(10s);
    REQUIRE(status);
    CHECK(*status == 128 + SIGTERM);
    CHECK(process_gone(leader_pid));
    CHECK_FALSE(fake.received_verb("MUNLOCK"));
  }
  CHECK(run_command(ctl, {"run", "a", "b", "--shared", "--", "true"}).status == 64);
  CHECK(run_command(ctl, {"lock", "a", "--ttl", "1s", "--permits", "0"}).status == 64);
  CHECK(run_command(ctl, {"lock", "a", "a", "--ttl", "1s"}).status == 64);
}

namespace {

// The real daemon must serve the lock family for the tests below: say so when it does not.
void require_lock_family(const fleet_and_daemon& env) {
  const std::string hello = env.client().request("HELLO");
  INFO("HELLO answered '"
       << hello
       << "': this daemon does not serve protocol 1.1 (SHARED, PERMITS, MLOCK); build it from "
          "a tree where the lock family is served");
  REQUIRE(hello.find(" proto=1.1 ") != std::string::npos);
}

std::string owner_in(const run_result& locked) {
  return locked.out.substr(0, locked.out.find(' '));
}

} // namespace

TEST_CASE("redlockctl lock --shared and --permits, status with readers and permits",
          "[integration][redlockctl][kinds]") {
  fleet_and_daemon env;
  require_lock_family(env);
  const auto first =
      run_command(ctl, with_addr(env.daemon, {"lock", "rw", "--ttl", "30s", "--shared"}));
  const auto second =
      run_command(ctl, with_addr(env.daemon, {"lock", "--shared", "rw", "--ttl", "30s"}));
  REQUIRE(first.status == 0);
  REQUIRE(second.status == 0);
  CHECK(owner_in(first).rfind("00001", 0) == 0);
  const auto writer = run_command(ctl, with_addr(env.daemon, {"lock", "rw", "--ttl", "30s"}));
  CHECK(writer.status == 1);
  CHECK(writer.err.find("BUSY") != std::string::npos);
  const auto readers = run_command(ctl, with_addr(env.daemon, {"status", "rw"}));
  CHECK(readers.status == 0);
  CHECK(readers.out.rfind("held ", 0) == 0);
  CHECK(readers.out.find(" readers=2") != std::string::npos);
  const auto readers_json = run_command(ctl, with_addr(env.daemon, {"status", "rw", "-o", "json"}));
  CHECK(nlohmann::json::parse(readers_json.out)["readers"] == 2);
  // EXTEND and UNLOCK work for every kind: the owner says which.
  CHECK(run_command(ctl, with_addr(env.daemon, {"extend", "rw", owner_in(first), "--ttl", "1m"}))
            .status == 0);
  CHECK(run_command(ctl, with_addr(env.daemon, {"unlock", "rw", owner_in(first)})).status == 0);
  CHECK(run_command(ctl, with_addr(env.daemon, {"unlock", "rw", owner_in(second)})).status == 0);
  CHECK(run_command(ctl, with_addr(env.daemon, {"status", "rw"})).out == "free\n");

  const auto p1 =
      run_command(ctl, with_addr(env.daemon, {"lock", "pool", "--ttl", "30s", "--permits", "2"}));
  const auto p2 =
      run_command(ctl, with_addr(env.daemon, {"lock", "pool", "--ttl", "30s", "--permits", "2"}));
  REQUIRE(p1.status == 0);
  REQUIRE(p2.status == 0);
  CHECK(owner_in(p1).rfind("00002", 0) == 0);
  CHECK(owner_in(p1) != owner_in(p2));
  CHECK(run_command(ctl, with_addr(env.daemon, {"lock", "pool", "--ttl", "30s", "--permits", "2"}))
            .status == 1);
  const auto mismatch =
      run_command(ctl, with_addr(env.daemon, {"lock", "pool", "--ttl", "30s", "--permits", "3"}));
  CHECK(mismatch.status == 4);
  CHECK(mismatch.err.find("ERR PERMITS_MISMATCH") != std::string::npos);
  const auto permits = run_command(ctl, with_addr(env.daemon, {"status", "pool", "-o", "json"}));
  const auto doc = nlohmann::json::parse(permits.out);
  CHECK(doc["state"] == "free"); // a semaphore and a lock of the same name differ
  CHECK(doc["permits_used"] == 2);
  CHECK(doc["permits"] == 2);
  CHECK(run_command(ctl, with_addr(env.daemon, {"unlock", "pool", owner_in(p1)})).status == 0);
  CHECK(run_command(ctl, with_addr(env.daemon, {"unlock", "pool", owner_in(p2)})).status == 0);
  CHECK(run_command(ctl, with_addr(env.daemon, {"status", "pool"})).out == "free\n");
}

TEST_CASE("redlockctl lock, extend and unlock several resources, and run holding them",
          "[integration][redlockctl][kinds]") {
  fleet_and_daemon env;
  require_lock_family(env);
  const auto set =
      run_command(ctl, with_addr(env.daemon, {"lock", "a:1", "a:2", "a:3", "--ttl", "30s"}));
  REQUIRE(set.status == 0);
  const std::string owner = owner_in(set);
  CHECK(owner.rfind("00003", 0) == 0);
  for (const char* resource : {"a:1", "a:2", "a:3"}) {
    CHECK(nodes_holding(env.fleet, resource, owner).size() >= 3);
    CHECK(run_command(ctl, with_addr(env.daemon, {"lock", resource, "--ttl", "1s"})).status == 1);
  }
  // A set that overlaps in one resource gets none of them.
  CHECK(run_command(ctl, with_addr(env.daemon, {"lock", "a:4", "a:3", "--ttl", "1s"})).status == 1);
  CHECK(run_command(ctl, with_addr(env.daemon, {"status", "a:4"})).out == "free\n");
  const auto extended = run_command(
      ctl,
      with_addr(env.daemon, {"-o", "json", "extend", "a:1", "a:2", "a:3", owner, "--ttl", "1m"}));
  REQUIRE(extended.status == 0);
  CHECK(nlohmann::json::parse(extended.out)["validity_ms"].get<std::int64_t>() > 59000);
  CHECK(nlohmann::json::parse(extended.out)["resources"] == nlohmann::json{"a:1", "a:2", "a:3"});
  // Naming fewer releases those only.
  CHECK(run_command(ctl, with_addr(env.daemon, {"unlock", "a:3", "a:2", owner})).status == 0);
  CHECK(run_command(ctl, with_addr(env.daemon, {"status", "a:2"})).out == "free\n");
  CHECK(run_command(ctl, with_addr(env.daemon, {"status", "a:1"})).out.rfind("held ", 0) == 0);
  CHECK(run_command(ctl, with_addr(env.daemon, {"unlock", "a:1", owner})).status == 0);
  CHECK(run_command(ctl, with_addr(env.daemon, {"unlock", "a:1", "a:2", owner})).status == 3);

  temp_dir dir;
  const std::string out = dir.path().string() + "/held.txt";
  const auto run = run_command(
      ctl, with_addr(env.daemon, {"run", "b:1", "b:2", "--ttl", "5s", "--", "sh", "-c",
                                  std::string(ctl) + " --addr 127.0.0.1:" +
                                      std::to_string(env.daemon.port()) + " status b:2 > " + out}));
  CHECK(run.status == 0);
  REQUIRE(lines_of(out).size() == 1);
  CHECK(lines_of(out)[0].rfind("held ", 0) == 0); // held while the command ran
  CHECK(run_command(ctl, with_addr(env.daemon, {"status", "b:1"})).out == "free\n");
  CHECK(run_command(ctl, with_addr(env.daemon, {"status", "b:2"})).out == "free\n");
}
