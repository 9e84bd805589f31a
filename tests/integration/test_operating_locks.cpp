// Operating locks (protocol v1.1, issue 26) over real masters and two daemons on one fleet:
// BREAK ends a hold taken through the other daemon, LIST shows every daemon's holds.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <string>

#include "checks.hpp"
#include "test_env.hpp"

using namespace redlockd::test;
using namespace std::chrono_literals;

namespace {

const std::string client_secret = "client-s3cret";
const std::string admin_secret = "admin-s3cret";

// Two daemons on one fleet, both with a client secret and the same admin secret.
struct two_daemons {
  two_daemons()
      : client_file(write(dir, "client", client_secret)),
        admin_file(write(dir, "admin", admin_secret)), a(options(fleet, *this)),
        b(options(fleet, *this)) {}

  static std::string write(const temp_dir& where, const std::string& name,
                           const std::string& value) {
    const auto path = where.path() / name;
    write_file(path, value + "\n");
    return path.string();
  }
  static daemon_options options(const redis_fleet& fleet, const two_daemons& self) {
    daemon_options o;
    o.nodes = fleet.addresses();
    o.extra = {{"client_secret_file", self.client_file}, {"admin_secret_file", self.admin_file}};
    o.client_secret = client_secret;
    return o;
  }
  static line_client as(const daemon_process& d, const std::string& secret) {
    line_client c(d.port());
    REQUIRE(c.request("AUTH " + secret) == "OK");
    return c;
  }
  // The key on every master: PTTL > 0 on each.
  bool held_everywhere(const std::string& key) const {
    for (std::size_t i = 0; i < fleet.size(); ++i)
      if (fleet.pttl(i, key) <= 0)
        return false;
    return true;
  }
  bool gone_everywhere(const std::string& key) const {
    for (std::size_t i = 0; i < fleet.size(); ++i)
      if (fleet.pttl(i, key) != -2)
        return false;
    return true;
  }

  redis_fleet fleet;
  temp_dir dir;
  std::string client_file;
  std::string admin_file;
  daemon_process a;
  daemon_process b;
};

nlohmann::json listing(line_client& c, const std::string& request) {
  const std::string reply = c.request(request);
  INFO("request: " << request << "  reply: " << reply);
  REQUIRE(starts_with(reply, "OK {"));
  return nlohmann::json::parse(reply.substr(3));
}

} // namespace

TEST_CASE("BREAK through one daemon ends a KEEP hold taken through the other",
          "[integration][operate]") {
  two_daemons t;
  line_client holder = two_daemons::as(t.a, client_secret);
  const lock_grant held = must_lock(holder, "LOCK job 3000 KEEP");
  // (Answered at quorum: the last masters' grants may still be on the way.)
  REQUIRE(eventually([&] { return t.held_everywhere("job"); }, 5s));

  // Without the admin AUTH BREAK is refused and changes nothing.
  line_client stranger(t.b.port());
  CHECK(starts_with(stranger.request("BREAK job"), "ERR NOAUTH "));
  line_client client = two_daemons::as(t.b, client_secret);
  CHECK(client.request("BREAK job") == "ERR NOAUTH BREAK needs AUTH with the admin secret");
  CHECK(t.held_everywhere("job"));
  CHECK(holder.try_read_line(200ms) == std::nullopt);

  // The admin secret authenticates (LOCK works) and allows BREAK.
  line_client admin = two_daemons::as(t.b, admin_secret);
  CHECK(admin.request("BREAK job") == "OK");
  CHECK(eventually([&] { return t.gone_everywhere("job"); }, 5s)); // a slow master's DEL too
  CHECK(admin.request("BREAK job") == "NOTHELD");
  CHECK(t.b.log().find("BREAK 'job' from 127.0.0.1:") != std::string::npos);

  // The KEEP holder on the other daemon hears of it at its next renewal.
  const auto pushed = holder.try_read_line(5s);
  CHECK(pushed == "LOST job " + held.owner);
  CHECK(t.a.info().at("keep_locks") == 0);

  // The next grant's fence is above the broken hold's.
  const lock_grant next = must_lock(admin, "LOCK job 10000");
  CHECK(next.fence > held.fence);
  CHECK(admin.request("UNLOCK job " + next.owner) == "OK");
}

TEST_CASE("BREAK of a KEEP hold on the same daemon pushes LOST at once and lock-delays it",
          "[integration][operate]") {
  redis_fleet fleet;
  temp_dir dir;
  const std::string admin_file = two_daemons::write(dir, "admin", admin_secret);
  daemon_process d(fleet.addresses(),
                   {{"admin_secret_file", admin_file}, {"lock_delay_ms", 60000}});
  line_client holder(d.port());
  const lock_grant held = must_lock(holder, "LOCK stuck 60000 KEEP");
  // No client secret: every AUTH passes, only the admin secret grants BREAK.
  line_client guesser(d.port());
  CHECK(guesser.request("AUTH guess") == "OK");
  CHECK(starts_with(guesser.request("BREAK stuck"), "ERR NOAUTH "));
  line_client admin = two_daemons::as(d, admin_secret);
  // The fence registers rise by one, in decimal, on every master that held it (raised here
  // first: a fence may always go up).
  fleet.run(0, "SET", "redlockd:fence", "1999");
  fleet.run(1, "SET", "redlockd:fence", "9999999999999999999");
  CHECK(admin.request("BREAK stuck") == "OK");
  CHECK(fleet.run(0, "GET", "redlockd:fence").str == "2000");
  CHECK(fleet.run(1, "GET", "redlockd:fence").str == "10000000000000000000");
  CHECK(holder.read_line() == "LOST stuck " + held.owner);
  // Lock-delay on this daemon: the resource stays refused although the masters are free.
  CHECK(starts_with(admin.request("LOCK stuck 10000"), "BUSY "));
}

TEST_CASE("BREAK without an admin secret configured is refused", "[integration][operate]") {
  redis_fleet fleet;
  daemon_process d(fleet.addresses());
  line_client c(d.port());
  const lock_grant held = must_lock(c, "LOCK r 10000");
  CHECK(c.request("AUTH anything") == "OK");
  CHECK(starts_with(c.request("BREAK r"), "ERR NOAUTH "));
  CHECK(c.request("UNLOCK r " + held.owner) == "OK");
  CHECK(starts_with(c.request("BREAK"), "ERR SYNTAX "));
}

TEST_CASE("LIST through one daemon shows the holds taken through the other",
          "[integration][operate]") {
  two_daemons t;
  line_client at_a = two_daemons::as(t.a, client_secret);
  const lock_grant one = must_lock(at_a, "LOCK alpha:1 10000");
  must_lock(at_a, "LOCK alpha:2 10000 KEEP");
  must_lock(at_a, "LOCK beta 10000");
  // A hold on a minority of the masters is no lock, and other keys are not holds.
  for (std::size_t i = 0; i < 2; ++i)
    t.fleet.run(i, "SET", "alpha:minority", "0123456789abcdef0123456789abcdef01234567", "PX",
                "10000");
  for (std::size_t i = 0; i < t.fleet.size(); ++i)
    t.fleet.run(i, "SET", "alpha:other", "not a hold", "PX", "10000");

  line_client at_b = two_daemons::as(t.b, client_secret);
  const std::string raw = at_b.request("LIST");
  CHECK(raw.find(one.owner) == std::string::npos); // never an owner
  const nlohmann::json all = listing(at_b, "LIST");
  REQUIRE(all.at("locks").size() == 3);
  CHECK(all.at("truncated") == false);
  const auto& first = all.at("locks").at(0);
  CHECK(first.at("resource") == "alpha:1");
  CHECK(first.at("kind") == "exclusive");
  CHECK(first.at("holders") == 1);
  CHECK(first.at("ttl_ms") > 0);
  CHECK(first.at("ttl_ms") <= 10000);
  CHECK(first.at("labels").empty());
  CHECK(all.at("locks").at(1).at("resource") == "alpha:2");
  CHECK(all.at("locks").at(2).at("resource") == "beta");

  const nlohmann::json prefixed = listing(at_b, "LIST alpha:");
  CHECK(prefixed.at("locks").size() == 2);
  const nlohmann::json first_only = listing(at_b, "LIST COUNT 1");
  CHECK(first_only.at("locks").size() == 1);
  CHECK(first_only.at("truncated") == true);
  CHECK(listing(at_b, "LIST alpha: COUNT 5000").at("locks").size() == 2); // clamped, not refused
  CHECK(listing(at_b, "LIST nothing-here").at("locks").empty());

  CHECK(starts_with(at_b.request("LIST COUNT 0"), "ERR BAD_COUNT "));
  CHECK(starts_with(at_b.request("LIST a b"), "ERR SYNTAX "));
  CHECK(starts_with(line_client(t.b.port()).request("LIST"), "ERR NOAUTH "));
}

TEST_CASE("LABEL is stored after the owner, shown by STATUS and LIST through the other daemon",
          "[integration][operate]") {
  two_daemons t;
  line_client at_a = two_daemons::as(t.a, client_secret);
  const lock_grant held = must_lock(at_a, "LOCK job 10000 LABEL host-7:4242");
  // a's last SETs land before b's UNLOCK: one landing after it would stay for its TTL.
  REQUIRE(eventually([&] { return t.held_everywhere("job"); }, 5s));
  CHECK(t.fleet.run(0, "GET", "job").str == held.owner + " host-7:4242");
  line_client at_b = two_daemons::as(t.b, client_secret);
  const std::string status = at_b.request("STATUS job");
  CHECK(starts_with(status, "OK HELD "));
  CHECK(status.ends_with(" label=host-7:4242"));
  const nlohmann::json listed = listing(at_b, "LIST job");
  REQUIRE(listed.at("locks").size() == 1);
  CHECK(listed.at("locks").at(0).at("labels") == nlohmann::json::array({"host-7:4242"}));

  // The owner alone releases and extends a labelled hold, through either daemon.
  CHECK(starts_with(at_b.request("EXTEND job " + held.owner + " 20000"), "OK "));
  CHECK(at_b.request("UNLOCK job " + held.owner) == "OK");
  CHECK(eventually([&] { return t.gone_everywhere("job"); }, 5s));
  CHECK(at_b.request("STATUS job") == "OK FREE");

  // A labelled KEEP lock is renewed (the renewal compares the owner only) and handed over.
  const lock_grant kept = must_lock(at_a, "LOCK kept 1000 KEEP LABEL keeper");
  line_client waiter = two_daemons::as(t.a, client_secret);
  waiter.send("LOCK kept 10000 WAIT 5000 LABEL next\n");
  CHECK(waiter.try_read_line(1500ms) == std::nullopt); // still held: its renewals work
  CHECK(at_a.request("UNLOCK kept " + kept.owner) == "OK");
  const auto next = parse_lock_ok(waiter.read_line());
  REQUIRE(next);
  CHECK(t.fleet.run(0, "GET", "kept").str == next->owner + " next");

  CHECK(starts_with(at_a.request(std::string("LOCK x 1000 LABEL bad\x01label")), "ERR BAD_LABEL "));
  CHECK(t.gone_everywhere("x"));
}

TEST_CASE("LIST shows shared holders and permits with their number and labels, through the "
          "other daemon",
          "[integration][operate]") {
  two_daemons t;
  line_client at_a = two_daemons::as(t.a, client_secret);
  line_client reader_2 = two_daemons::as(t.a, client_secret);
  must_lock(at_a, "LOCK report 10000 SHARED LABEL reader-1");
  must_lock(reader_2, "LOCK report 20000 SHARED LABEL reader-2");
  must_lock(at_a, "LOCK pool 10000 PERMITS 3 LABEL worker-1");
  line_client at_b = two_daemons::as(t.b, client_secret);
  const nlohmann::json listed = listing(at_b, "LIST");
  REQUIRE(listed.at("locks").size() == 2);
  const auto& pool = listed.at("locks").at(0);
  CHECK(pool.at("resource") == "pool");
  CHECK(pool.at("kind") == "permit");
  CHECK(pool.at("holders") == 1);
  CHECK(pool.at("labels") == nlohmann::json::array({"worker-1"}));
  const auto& report = listed.at("locks").at(1);
  CHECK(report.at("resource") == "report");
  CHECK(report.at("kind") == "shared");
  CHECK(report.at("holders") == 2);
  CHECK(report.at("ttl_ms") > 10000); // the reader that holds longest
  CHECK(report.at("labels") == nlohmann::json::array({"reader-2"})); // and its label
}

TEST_CASE("MAXHOLD and max_hold_ms stop renewing a KEEP lock: LOST and released",
          "[integration][operate]") {
  redis_fleet fleet;
  daemon_process d(fleet.addresses(), {{"max_hold_ms", 1500}});
  line_client c(d.port());
  const lock_grant capped = must_lock(c, "LOCK capped 300 KEEP MAXHOLD 600");
  const lock_grant by_config = must_lock(c, "LOCK config 300 KEEP");
  // Renewed past its TTL until MAXHOLD, then LOST; the config's cap ends the other later.
  CHECK(c.read_line() == "LOST capped " + capped.owner);
  CHECK(fleet.pttl(0, "config") > 0);
  CHECK(c.read_line() == "LOST config " + by_config.owner);
  CHECK(eventually(
      [&] {
        for (std::size_t i = 0; i < fleet.size(); ++i)
          if (fleet.pttl(i, "capped") != -2 || fleet.pttl(i, "config") != -2)
            return false;
        return true;
      },
      2s));
  CHECK(d.info().at("keep_locks") == 0);
  CHECK(d.log().find("held for its MAXHOLD") != std::string::npos); // not a failed renewal
  CHECK(starts_with(c.request("LOCK r 1000 MAXHOLD 100"), "ERR SYNTAX "));
}

TEST_CASE("redlockctl list, break and status with a label, through the other daemon",
          "[integration][operate][redlockctl]") {
  two_daemons t;
  line_client at_a = two_daemons::as(t.a, client_secret);
  must_lock(at_a, "LOCK jobs/1 30000 LABEL worker-1");
  must_lock(at_a, "LOCK jobs/2 30000");
  const std::string ctl = REDLOCKCTL_BINARY;
  const std::string addr = "127.0.0.1:" + std::to_string(t.b.port());

  const auto status =
      run_command(ctl, {"--addr", addr, "--secret-file", t.client_file, "status", "jobs/1"});
  CHECK(status.status == 0);
  CHECK(starts_with(status.out, "held "));
  CHECK(status.out.ends_with(" label=worker-1\n"));
  const auto status_json = run_command(
      ctl, {"--addr", addr, "--secret-file", t.client_file, "-o", "json", "status", "jobs/1"});
  CHECK(nlohmann::json::parse(status_json.out).at("label") == "worker-1");

  const auto listed =
      run_command(ctl, {"--addr", addr, "--secret-file", t.client_file, "list", "jobs/"});
  CHECK(listed.status == 0);
  INFO(listed.out);
  CHECK(starts_with(listed.out, "jobs/1 exclusive "));
  CHECK(listed.out.find("ms worker-1\njobs/2 exclusive ") != std::string::npos);
  const auto first =
      run_command(ctl, {"--addr", addr, "--secret-file", t.client_file, "list", "--count", "1"});
  CHECK(first.out.find("jobs/2") == std::string::npos);
  CHECK(first.out.find("more not shown") != std::string::npos);

  // break needs the admin secret: the client secret is refused, nothing changes.
  const auto refused =
      run_command(ctl, {"--addr", addr, "--secret-file", t.client_file, "break", "jobs/1"});
  CHECK(refused.status == 64); // no admin secret given
  const auto as_client =
      run_command(ctl, {"--addr", addr, "--admin-secret-file", t.client_file, "break", "jobs/1"});
  CHECK(as_client.status == 6);
  CHECK(t.held_everywhere("jobs/1"));
  const auto broken =
      run_command(ctl, {"--addr", addr, "--admin-secret-file", t.admin_file, "break", "jobs/1"});
  CHECK(broken.status == 0);
  CHECK(eventually([&] { return t.gone_everywhere("jobs/1"); }, 5s));
  const auto again =
      run_command(ctl, {"--addr", addr, "--admin-secret-file", t.admin_file, "break", "jobs/1"});
  CHECK(again.status == 3);
}
