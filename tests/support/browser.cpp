#include "browser.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <openssl/evp.h>
#include <optional>
#include <poll.h>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

namespace redlockd::test {
namespace {

namespace fs = std::filesystem;

// Flags for a browser that must not reach beyond loopback or leave anything behind.
const std::vector<std::string> quiet_flags = {"--headless",
                                              "--no-sandbox",
                                              "--disable-gpu",
                                              "--disable-quic",
                                              "--no-first-run",
                                              "--disable-background-networking",
                                              "--disable-component-update",
                                              "--disable-sync",
                                              "--disable-extensions",
                                              "--hide-scrollbars",
                                              "--mute-audio",
                                              "--remote-debugging-pipe"};

std::string base64_decode(const std::string& text) {
  std::string out(text.size() / 4 * 3 + 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0)
    throw std::runtime_error("the browser sent a screenshot that is not base64");
  std::size_t size = static_cast<std::size_t>(n);
  // EVP_DecodeBlock counts the bytes the padding stands for.
  for (auto it = text.rbegin(); it != text.rend() && *it == '='; ++it)
    --size;
  out.resize(size);
  return out;
}

void write_all(int fd, const std::string& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      throw std::runtime_error(std::string("writing to the browser: ") + std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
}

} // namespace

std::string headless_browser::executable() {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / "chromium";
    if (::access(candidate.c_str(), X_OK) == 0)
      return candidate.string();
  }
  return "";
}

headless_browser::headless_browser(const fs::path& dir) : dir_(dir) {
  const std::string binary = executable();
  if (binary.empty())
    throw std::runtime_error("chromium is not installed (Debian package chromium)");
  int commands[2];
  int replies[2];
  if (::pipe2(commands, O_CLOEXEC) != 0 || ::pipe2(replies, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  std::vector<std::string> args = quiet_flags;
  args.push_back("--user-data-dir=" + (dir / "profile").string());
  args.push_back("about:blank");
  process_ =
      child_process(binary, args, dir / "chromium.log", {}, {{3, commands[0]}, {4, replies[1]}});
  ::close(commands[0]);
  ::close(replies[1]);
  to_browser_ = commands[1];
  from_browser_ = replies[0];
}

headless_browser::~headless_browser() {
  if (to_browser_ >= 0) {
    try {
      call("Browser.close", nlohmann::json::object(), false, std::chrono::seconds(5));
    } catch (const std::exception&) {
      // it is killed below anyway
    }
  }
  if (!process_.wait_for(std::chrono::seconds(5)))
    process_.kill();
  if (to_browser_ >= 0)
    ::close(to_browser_);
  if (from_browser_ >= 0)
    ::close(from_browser_);
}

std::string headless_browser::log() const {
  return file_tail(dir_ / "chromium.log", 4000);
}

void headless_browser::open(const std::string& url, int width, int height) {
  const nlohmann::json target =
      call("Target.createTarget", {{"url", "about:blank"}}, false).at("targetId");
  session_ = call("Target.attachToTarget", {{"targetId", target}, {"flatten", true}}, false)
                 .at("sessionId")
                 .get<std::string>();
  width_ = width;
  call("Emulation.setScriptExecutionDisabled", {{"value", true}}, true);
  call("Emulation.setDeviceMetricsOverride",
       {{"width", width}, {"height", height}, {"deviceScaleFactor", 1}, {"mobile", false}}, true);
  call("Page.enable", nlohmann::json::object(), true);
  const nlohmann::json navigated = call("Page.navigate", {{"url", url}}, true);
  if (navigated.contains("errorText"))
    throw std::runtime_error("the browser could not load " + url + ": " +
                             navigated.at("errorText").get<std::string>());
  if (!wait_event("Page.loadEventFired", std::chrono::seconds(30)))
    throw std::runtime_error("the browser did not finish loading " + url + " within 30 s");
}

nlohmann::json headless_browser::evaluate(const std::string& expression) {
  const nlohmann::json result =
      call("Runtime.evaluate", {{"expression", expression}, {"returnByValue", true}}, true);
  if (result.contains("exceptionDetails"))
    throw std::runtime_error("evaluating in the page failed: " +
                             result.at("exceptionDetails").dump());
  return result.at("result").value("value", nlohmann::json());
}

bool headless_browser::reloaded_within(std::chrono::milliseconds timeout) {
  return wait_event("Page.loadEventFired", timeout);
}

void headless_browser::screenshot(const fs::path& png) {
  const int height = evaluate("document.documentElement.scrollHeight").get<int>();
  call("Emulation.setDeviceMetricsOverride",
       {{"width", width_}, {"height", height}, {"deviceScaleFactor", 1}, {"mobile", false}}, true);
  const nlohmann::json shot = call("Page.captureScreenshot", {{"format", "png"}}, true);
  write_file(png, base64_decode(shot.at("data").get<std::string>()));
}

nlohmann::json headless_browser::call(const std::string& method, const nlohmann::json& params,
                                      bool to_page, std::chrono::milliseconds timeout) {
  const int id = next_id_++;
  nlohmann::json message = {{"id", id}, {"method", method}, {"params", params}};
  if (to_page)
    message["sessionId"] = session_;
  write_all(to_browser_, message.dump() + '\0');
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::optional<nlohmann::json> reply = next_message(deadline);
    if (!reply)
      throw std::runtime_error("the browser did not answer " + method);
    if (!reply->contains("id")) {
      events_.push_back(std::move(*reply));
      continue;
    }
    if (reply->at("id") != id)
      continue;
    if (reply->contains("error"))
      throw std::runtime_error(method + " failed: " + reply->at("error").dump());
    return reply->value("result", nlohmann::json::object());
  }
}

bool headless_browser::wait_event(const std::string& method, std::chrono::milliseconds timeout) {
  const auto matches = [&](const nlohmann::json& event) {
    return event.value("method", "") == method && event.value("sessionId", "") == session_;
  };
  while (!events_.empty()) {
    const nlohmann::json event = std::move(events_.front());
    events_.pop_front();
    if (matches(event))
      return true;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::optional<nlohmann::json> message = next_message(deadline);
    if (!message)
      return false;
    if (!message->contains("id") && matches(*message))
      return true;
  }
}

std::optional<nlohmann::json>
headless_browser::next_message(std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto end = received_.find('\0');
    if (end != std::string::npos) {
      nlohmann::json message = nlohmann::json::parse(received_.substr(0, end));
      received_.erase(0, end + 1);
      return message;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return std::nullopt;
    pollfd p{from_browser_, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready <= 0)
      return std::nullopt;
    char buffer[65536];
    const ssize_t n = ::read(from_browser_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      throw std::runtime_error("the browser closed its DevTools pipe; its log:\n" + log());
    received_.append(buffer, static_cast<std::size_t>(n));
  }
}

} // namespace redlockd::test
