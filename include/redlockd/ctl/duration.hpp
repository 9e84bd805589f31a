// Durations on the command line: "250ms", "30s", "5m", "1h". The unit is required.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace redlockd::ctl {

// std::nullopt for anything but digits followed by ms, s, m or h (a bare number included).
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

// Digits only: a duration written without its unit ("30"), refused with its own message.
bool lacks_unit(std::string_view text);

} // namespace redlockd::ctl
