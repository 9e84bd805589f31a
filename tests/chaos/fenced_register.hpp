// The protected resource of the chaos suite: one set per resource, owned by the harness and
// served over a unix socket, that refuses any access whose fencing token is lower than the
// highest it has seen (Kleppmann's fenced storage; Jepsen's lock-set).
//
// Line protocol, one reply per request:
//   READ <resource> <fence> <process>  ->  OK <e1,e2,...|->   or  STALE <highest>
//   WRITE <resource> <fence> <e1,...>  ->  OK                 or  STALE <highest>
// A READ raises the highest fence too: once a newer holder has read, an older holder that read
// before it can no longer write, so read-sleep-write loses no update in any interleaving.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "history.hpp"

namespace redlockd::chaos {

class fenced_register {
 public:
  // Applies one request line and returns the reply line (without LF).
  std::string apply(const std::string& line);
  register_state snapshot() const;
  // The process that last read `resource` and when: most likely its current holder.
  std::optional<std::pair<std::string, std::int64_t>> last_reader(const std::string& resource);

 private:
  struct cell {
    std::uint64_t highest_fence = 0;
    std::string elements; // comma-separated, as the clients send them
    std::string last_reader;
    std::int64_t last_read_ns = 0;
  };
  mutable std::mutex mutex_;
  std::map<std::string, cell> cells_;
  std::uint64_t writes_accepted_ = 0;
  std::uint64_t writes_rejected_ = 0;
  std::uint64_t reads_rejected_ = 0;
};

// Serves a fenced_register on a unix socket from one thread (poll over all connections).
class register_server {
 public:
  register_server(fenced_register& store, std::filesystem::path socket_path);
  ~register_server();
  register_server(const register_server&) = delete;
  register_server& operator=(const register_server&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  void run();

  fenced_register& store_;
  std::filesystem::path path_;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  std::thread thread_;
};

} // namespace redlockd::chaos
