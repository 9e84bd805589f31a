// Durations on the command line: "250ms", "30s", "1.5s", "1m30s", "2h". The unit is required.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace redlockd::ctl {

// One or more parts, each a number (digits, optionally with a fraction: "1.5", ".5") followed by
// its unit: h, m, s or ms, largest first, each at most once ("1h30m", "1m30.5s", "2s500ms"). The
// sum must be a whole number of milliseconds. std::nullopt for anything else, a bare number
// included.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

// A number without any unit ("30", "1.5"), refused with its own message.
bool lacks_unit(std::string_view text);

} // namespace redlockd::ctl
