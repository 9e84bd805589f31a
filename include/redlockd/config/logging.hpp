// The daemon's logger: text or JSON lines to stderr or a file that SIGHUP reopens; under systemd
// (JOURNAL_STREAM names stderr) records go to the journal with their priority.
#pragma once

#include "redlockd/config/config.hpp"

#include <memory>
#include <string>
#include <string_view>

namespace spdlog {
class logger;
}

namespace redlockd {

// Builds the logger the config asks for. Throws std::runtime_error if the file cannot be opened.
std::shared_ptr<spdlog::logger> make_logger(const config& cfg);

// After SIGHUP: reopens the log file (after rotation) and applies the config's level and format.
void reconfigure_logger(spdlog::logger& log, const config& cfg);

// One log record as a JSON object line, for log_format "json" (exposed for tests).
std::string json_log_line(std::string_view time, std::string_view level, std::string_view message);

} // namespace redlockd
