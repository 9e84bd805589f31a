// The one batching writer (see batch_writer.hpp): a posted flush per loop turn, one write in
// flight at a time.
#include "redlockd/net/batch_writer.hpp"

#include "redlockd/net/stream.hpp"

namespace redlockd {

void batch_writer::discard() {
  pending_.clear();
  ++epoch_;
}

void batch_writer::schedule() {
  if (flush_posted_ || in_flight_ || pending_.empty())
    return;
  // Runs after the handlers already queued in this loop turn: their bytes join this write.
  flush_posted_ = true;
  net::post(out_.get_executor(), [this, keep = holder_.lock()] {
    flush_posted_ = false;
    write_pending();
  });
}

void batch_writer::write_pending() {
  if (in_flight_)
    return;
  if (pending_.empty()) {
    owner_.on_drained();
    return;
  }
  if (!out_.is_open())
    return; // kept: a link writes it once it has reconnected, unless it discards it first
  writing_.swap(pending_);
  pending_.clear();
  in_flight_ = true;
  out_.async_write(net::buffer(writing_), [this, epoch = epoch_, keep = holder_.lock()](
                                              const error_code_t& ec) { on_written(epoch, ec); });
}

void batch_writer::on_written(std::uint64_t epoch, const error_code_t& ec) {
  in_flight_ = false;
  writing_.clear();
  if (epoch != epoch_ || !owner_.on_written(ec))
    return;
  write_pending(); // what was appended meanwhile
}

} // namespace redlockd
