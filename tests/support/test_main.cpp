#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <string>

// Catch's console reporter indents a failed test's name to just after its first ": ", and asserts
// (aborting the test program, hiding the failure) when that indent reaches its line width; one
// column short of it, it prints "-" lines for ever. Every program with this main checks its own
// names, so a long name fails here, not in CI's failure.
TEST_CASE("every test's name prints in Catch's console reporter", "[catch]") {
  const std::size_t width = CATCH_CLARA_TEXTFLOW_CONFIG_CONSOLE_WIDTH;
  for (const Catch::TestCase& test : Catch::getRegistryHub().getTestCaseRegistry().getAllTests()) {
    const std::size_t colon = test.name.find(": ");
    INFO(test.name);
    CHECK((colon == std::string::npos || colon + 3 < width));
  }
}
