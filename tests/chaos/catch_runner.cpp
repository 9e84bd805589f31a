// The support library registers a Catch listener (daemon_process.cpp) to dump daemon logs of
// failed tests; the chaos harness has no Catch main, so it carries the implementation here.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
