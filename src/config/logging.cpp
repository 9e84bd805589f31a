#include "redlockd/config/logging.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/formatter.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/sinks/systemd_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <sys/stat.h>
#include <unistd.h>

namespace redlockd {
namespace {

constexpr const char* text_pattern = "%Y-%m-%dT%H:%M:%S.%e %l %v";

// {"time": ..., "level": ..., "message": ...} per line; nlohmann escapes the message.
class json_formatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto time = std::chrono::system_clock::to_time_t(msg.time);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(msg.time.time_since_epoch()).count() %
        1000;
    std::tm utc{};
    gmtime_r(&time, &utc);
    char stamp[40];
    const std::size_t n = std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &utc);
    std::snprintf(stamp + n, sizeof stamp - n, ".%03dZ", static_cast<int>(ms));
    const auto level = spdlog::level::to_string_view(msg.level);
    const std::string line = json_log_line(stamp, {level.data(), level.size()},
                                           {msg.payload.data(), msg.payload.size()});
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<json_formatter>();
  }
};

// systemd sets JOURNAL_STREAM to "<device>:<inode>" of the journal stream it connects to stderr.
// It is inherited, so it counts only while stderr is still that stream.
bool stderr_is_journal() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  if (stream == nullptr)
    return false;
  unsigned long long device = 0;
  unsigned long long inode = 0;
  if (std::sscanf(stream, "%llu:%llu", &device, &inode) != 2)
    return false;
  struct stat st {};
  if (fstat(STDERR_FILENO, &st) != 0)
    return false;
  return static_cast<unsigned long long>(st.st_dev) == device &&
         static_cast<unsigned long long>(st.st_ino) == inode;
}

spdlog::sink_ptr make_sink(const config& cfg) {
  // Under systemd, records go to the journal directly, each with its priority (journalctl -p
  // warning shows warnings and worse); the journal keeps the time, so only the message is sent.
  if (cfg.log_file.empty() && stderr_is_journal())
    return std::make_shared<spdlog::sinks::systemd_sink_mt>("redlockd");
  if (cfg.log_file.empty())
    return std::make_shared<spdlog::sinks::stderr_sink_mt>();
  return std::make_shared<spdlog::sinks::basic_file_sink_mt>(cfg.log_file, false);
}

void apply_format(spdlog::logger& log, const config& cfg) {
  if (cfg.log_format == "json")
    log.set_formatter(std::make_unique<json_formatter>());
  else
    log.set_formatter(std::make_unique<spdlog::pattern_formatter>(text_pattern));
  log.set_level(spdlog::level::from_str(cfg.log_level));
}

} // namespace

std::string json_log_line(std::string_view time, std::string_view level, std::string_view message) {
  nlohmann::json record = {{"time", time}, {"level", level}, {"message", message}};
  // Invalid UTF-8 in a message (a client's bytes) must not make the log line throw.
  return record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::shared_ptr<spdlog::logger> make_logger(const config& cfg) {
  auto log = std::make_shared<spdlog::logger>("redlockd", make_sink(cfg));
  apply_format(*log, cfg);
  log->flush_on(spdlog::level::info);
  return log;
}

void reconfigure_logger(spdlog::logger& log, const config& cfg) {
  // One thread logs, so swapping the sink here cannot race with a write.
  log.sinks().assign(1, make_sink(cfg));
  apply_format(log, cfg);
}

} // namespace redlockd
