// A user-space TCP proxy between one daemon and one master that can delay or blackhole the
// traffic (tc netem is not available everywhere; this works on any loopback).
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

namespace redlockd::chaos {

class fault_proxy {
 public:
  enum class mode : std::uint8_t {
    pass,      // forward both ways
    delay,     // forward, each chunk held back by delay_ms
    blackhole, // accept and read, forward nothing, answer nothing: the master seems stopped,
               // but unlike SIGSTOP nothing queues up to run later
  };

  // Listens on a free 127.0.0.1 port and forwards every connection to 127.0.0.1:upstream_port.
  explicit fault_proxy(std::uint16_t upstream_port);
  ~fault_proxy();
  fault_proxy(const fault_proxy&) = delete;
  fault_proxy& operator=(const fault_proxy&) = delete;

  std::uint16_t port() const { return port_; }
  // Switching back to pass closes every connection opened before: what the blackhole swallowed
  // is gone, so the daemon must reconnect rather than resume a stream with a hole in it.
  void set_mode(mode m, int delay_ms = 0);

 private:
  void run();

  std::uint16_t upstream_port_;
  std::uint16_t port_ = 0;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  std::atomic<mode> mode_{mode::pass};
  std::atomic<int> delay_ms_{0};
  std::atomic<std::uint64_t> epoch_{0}; // bumped on heal: older connections are closed
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

} // namespace redlockd::chaos
