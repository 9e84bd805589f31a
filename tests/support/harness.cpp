#include "harness.hpp"

#define CATCH_CONFIG_EXTERNAL_INTERFACES
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string_view>

namespace {

bool test_failed = false;
bool test_running = false;
std::atomic<std::size_t> problems_outside{0};

// Remembers whether a test case runs and whether it has a failed assertion, so that helpers can
// dump logs and report what they find.
struct redlockd_harness_listener : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;

  void testCaseStarting(Catch::TestCaseInfo const& info) override {
    test_failed = false;
    test_running = true;
    TestEventListenerBase::testCaseStarting(info);
  }

  void testCaseEnded(Catch::TestCaseStats const& stats) override {
    test_running = false;
    TestEventListenerBase::testCaseEnded(stats);
  }

  bool assertionEnded(Catch::AssertionStats const& stats) override {
    if (!stats.assertionResult.isOk()) {
      test_failed = true;
    }
    return TestEventListenerBase::assertionEnded(stats);
  }
};

} // namespace

CATCH_REGISTER_LISTENER(redlockd_harness_listener)

namespace redlockd::test {

bool current_test_failed() {
  return test_failed;
}

bool in_test_case() {
  return test_running;
}

void report_problem(const std::string& what) noexcept {
  if (test_running) {
    try {
      FAIL_CHECK(what);
      return;
    } catch (...) {
      // FAIL_CHECK throws only when Catch aborts the run (--abort): the failure is recorded.
      return;
    }
  }
  ++problems_outside;
  try {
    std::cerr << "redlockd test harness: " << what << std::endl;
  } catch (...) {
  }
}

std::size_t harness_problems() {
  return problems_outside.load();
}

std::string sanitizer_report(const std::string& text, std::size_t max_bytes) {
  static constexpr std::array<std::string_view, 5> markers = {
      "AddressSanitizer", "LeakSanitizer", "ThreadSanitizer", "UndefinedBehaviorSanitizer",
      "runtime error:"};
  std::size_t first = std::string::npos;
  for (const auto marker : markers) {
    first = std::min(first, text.find(marker));
  }
  if (first == std::string::npos) {
    return {};
  }
  const std::size_t line_start = text.rfind('\n', first);
  const std::size_t start = line_start == std::string::npos ? 0 : line_start + 1;
  std::string report = text.substr(start, max_bytes);
  if (text.size() - start > max_bytes) {
    report += "\n[...]";
  }
  return report;
}

void cannot_run(const std::string& missing) {
  FAIL("this test cannot run here: " << missing);
}

} // namespace redlockd::test
