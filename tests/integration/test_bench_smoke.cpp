// redlock-bench runs against a real daemon and counts what it did. Nothing here is about speed.
#include <catch2/catch.hpp>

#include "proc.hpp"
#include "test_env.hpp"

using namespace redlockd::test;

TEST_CASE("redlock-bench cycles LOCK and UNLOCK and leaves nothing locked",
          "[integration][bench]") {
  fleet_and_daemon env;
  const auto result =
      run_command(REDLOCK_BENCH_BINARY,
                  {"-c", "4", "-p", "2", "-r", "50", "-d", "1", "--warmup", "0", "--ttl", "5000",
                   "--addr", "127.0.0.1:" + std::to_string(env.daemon.port()), "--daemon-pid",
                   std::to_string(daemon_pid(env.daemon)), "--json"},
                  std::chrono::seconds(30));
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(result.status == 0);
  const auto report = nlohmann::json::parse(result.out);
  CHECK(report.at("cycles").get<std::int64_t>() > 0);
  CHECK(report.at("errors").get<std::int64_t>() == 0);
  CHECK(eventually([&] { return lock_keys(env.fleet).empty(); }));
}
