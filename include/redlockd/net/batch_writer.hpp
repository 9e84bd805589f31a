// The write side of a connection, for client sessions and Redis links alike: everything appended
// in one loop turn goes out in one write. The first append of a turn posts a flush, which runs
// after the handlers already queued (their bytes join the same write); while a write is in
// flight, appends accumulate and go out together when it completes.
#pragma once

#include "redlockd/net/net.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace redlockd {

class stream;

class batch_writer {
 public:
  // The connection that owns the writer.
  class owner {
   public:
    // A write ended (`ec` set when it failed). Return false when the connection is going away:
    // nothing more is written.
    virtual bool on_written(const error_code_t& ec) = 0;
    // Everything appended has been written.
    virtual void on_drained() {}

    virtual ~owner() = default;
  };

  batch_writer(stream& out, owner& told) : out_(out), owner_(told) {}
  batch_writer(const batch_writer&) = delete;
  batch_writer& operator=(const batch_writer&) = delete;

  // For an owner that may be destroyed while a flush is posted or a write is in flight (a
  // session whose connection closed): each of those holds it alive.
  void hold_while_busy(std::weak_ptr<void> holder) { holder_ = std::move(holder); }

  // Queues bytes; they go out with everything else appended in this loop turn.
  void append(std::string_view bytes) {
    pending_.append(bytes);
    schedule();
  }

  // Drops what is queued and forgets the write in flight: it completes (on a connection that
  // ended, with an error) without being reported, and what is appended meanwhile waits for
  // the next append after it.
  void discard();

  // After a burst: gives back buffer capacity over `keep` bytes, now for what is not in use and
  // for the write in flight once it completes. A busy connection that never calls it keeps its
  // buffers, so a steady stream of writes allocates nothing.
  void release_spare(std::size_t keep);

  // Appended and not yet handed to a write.
  std::size_t queued_bytes() const { return pending_.size(); }
  // Appended and not yet written: queued or in flight.
  std::size_t unwritten_bytes() const { return pending_.size() + writing_.size(); }
  // Bytes the two buffers hold, used or not.
  std::size_t capacity() const { return pending_.capacity() + writing_.capacity(); }
  // Nothing queued, no flush posted, no write in flight.
  bool idle() const { return pending_.empty() && !flush_posted_ && !in_flight_; }

 private:
  void schedule();
  void write_pending();
  void on_written(std::uint64_t epoch, const error_code_t& ec);
  void trim();

  stream& out_;
  owner& owner_;
  std::weak_ptr<void> holder_;
  std::string pending_; // appended, not yet written
  std::string writing_; // in flight; swapped with pending_ so that both keep their capacity
  bool flush_posted_ = false;
  bool in_flight_ = false;
  std::uint64_t epoch_ = 0; // bumped by discard(): a completion from before is not reported
  std::optional<std::size_t> release_above_; // release_spare() asked for; not yet all done
};

} // namespace redlockd
