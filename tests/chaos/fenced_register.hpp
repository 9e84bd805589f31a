// The protected resource of the chaos suite: one set per resource, owned by the harness and
// served over a unix socket, that refuses any access whose fencing token is lower than the
// highest it has seen (Kleppmann's fenced storage; Jepsen's lock-set), with the read-write rules
// of the research note (next-lock-kinds.md §3.3) for shared holders.
//
// Line protocol, one reply per request:
//   READ <resource> <fence> <process>   ->  OK <e1,e2,...|->   or  STALE <max_all>
//   WRITE <resource> <fence> <e1,...>   ->  OK                 or  STALE <max_all>
//   SREAD <resource> <fence> <process>  ->  OK <e1,e2,...|->   or  STALE <max_w>
// Each resource keeps max_all (the largest fence of any access) and max_w (the largest of an
// exclusive holder's: READ or WRITE). READ and WRITE are an exclusive holder's: accepted iff
// fence >= max_all, and they raise both. SREAD is a shared holder's: accepted iff fence >= max_w,
// and it raises max_all only, so readers never refuse one another while a writer granted after
// them refuses their later reads once it has touched the resource, and an older writer is refused
// once a newer reader has read. A READ raises max_all too: once a newer holder has read, an
// older holder that read before it can no longer write, so read-sleep-write loses no update in
// any interleaving. A semaphore's permits use one resource per slot, "<semaphore>#<slot>".
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
    std::uint64_t max_all = 0; // the largest fence of any access
    std::uint64_t max_w = 0;   // the largest fence of an exclusive holder's access
    std::string elements;      // comma-separated, as the clients send them
    std::string last_reader;
    std::int64_t last_read_ns = 0;
  };
  mutable std::mutex mutex_;
  std::map<std::string, cell> cells_;
  std::uint64_t writes_accepted_ = 0;
  std::uint64_t writes_rejected_ = 0;
  std::uint64_t reads_rejected_ = 0;
  std::uint64_t shared_reads_rejected_ = 0;
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
