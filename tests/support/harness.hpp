// What the test harness checks besides the tests' own assertions, and how it says so: problems
// found outside a test's own code (a daemon that crashed, needed SIGKILL or printed a sanitizer
// report; a test that cannot run on this machine) fail the running test case.
#pragma once

#include <cstddef>
#include <string>

namespace redlockd::test {

// True once any assertion of the running Catch test case has failed.
bool current_test_failed();
// True while a Catch test case runs (never in the chaos harness, which has no Catch session).
bool in_test_case();

// Fails the running test case with `what` (FAIL_CHECK: the test goes on), or, outside of a test
// case, prints it to stderr and counts it in harness_problems(). Never throws: safe in a
// destructor, during stack unwinding too.
void report_problem(const std::string& what) noexcept;
// How many problems report_problem() saw outside of test cases.
std::size_t harness_problems();

// The sanitizer report in `text` (output of a sanitized binary): from the first line that names
// AddressSanitizer, LeakSanitizer, ThreadSanitizer or UndefinedBehaviorSanitizer or holds
// "runtime error:", at most `max_bytes` of it. Empty when there is none.
std::string sanitizer_report(const std::string& text, std::size_t max_bytes = 6000);

// For a test that cannot run here: fails it (FAIL, which ends the test case) naming what is
// missing. Never a skip:  if (!possible) { cannot_run("needs ..."); return; }
void cannot_run(const std::string& missing);

} // namespace redlockd::test
