// Durations on the command line: "250ms", "30s", "5m", "1h", or plain milliseconds ("1500").
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace redlockd::ctl {

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

} // namespace redlockd::ctl
