// Headless Chromium (Debian's chromium) for tests that check what a real browser renders. It is
// driven over the DevTools protocol on a pipe (--remote-debugging-pipe: JSON messages ended by a
// NUL byte, commands on the browser's fd 3, replies and events on its fd 4), so no npm package,
// websocket or debugging port is needed.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <deque>
#include <filesystem>
#include <string>

#include "process.hpp"

namespace redlockd::test {

class headless_browser {
 public:
  // The chromium executable on PATH; "" when it is not installed.
  static std::string executable();

  // Starts chromium with a fresh profile in `dir` (its log goes to dir/chromium.log). Throws
  // std::runtime_error when it does not start or does not answer.
  explicit headless_browser(const std::filesystem::path& dir);
  ~headless_browser();
  headless_browser(const headless_browser&) = delete;
  headless_browser& operator=(const headless_browser&) = delete;

  // Opens `url` in a new tab, `width` x `height` CSS pixels, with the page's own scripts turned
  // off, and waits for its load event.
  void open(const std::string& url, int width, int height);
  // The value of a JavaScript expression in the open page. DevTools evaluates it even while the
  // page's scripts are off; the page itself runs none.
  nlohmann::json evaluate(const std::string& expression);
  // Waits up to `timeout` for the open page to load again (a reload it started itself).
  bool reloaded_within(std::chrono::milliseconds timeout);
  // Saves a PNG of the whole page at the open width.
  void screenshot(const std::filesystem::path& png);
  // The log of the browser, for failure messages.
  std::string log() const;

 private:
  // Sends a command (to the open tab when `to_page`) and returns its result; throws
  // std::runtime_error on an error reply or after `timeout`.
  nlohmann::json call(const std::string& method, const nlohmann::json& params, bool to_page,
                      std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Waits for an event of the open tab; false after `timeout`.
  bool wait_event(const std::string& method, std::chrono::milliseconds timeout);
  // The next message; std::nullopt after `deadline`.
  std::optional<nlohmann::json> next_message(std::chrono::steady_clock::time_point deadline);

  std::filesystem::path dir_;
  child_process process_;
  int to_browser_ = -1;
  int from_browser_ = -1;
  std::string received_;              // bytes read but not yet a whole message
  std::deque<nlohmann::json> events_; // events read while waiting for a reply
  int next_id_ = 1;
  std::string session_; // the open tab's DevTools session
  int width_ = 0;
};

} // namespace redlockd::test
