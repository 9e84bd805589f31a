// The one batching writer (see batch_writer.hpp): a posted flush per loop turn, one write in
// flight at a time.
#include "redlockd/net/batch_writer.hpp"

#include "redlockd/net/stream.hpp"

namespace redlockd {

void batch_writer::discard() {
  pending_.clear();
  ++epoch_;
}

void batch_writer::release_spare(std::size_t keep) {
  release_above_ = keep;
  trim();
}

void batch_writer::trim() {
  if (!release_above_)
    return;
  if (pending_.empty() && pending_.capacity() > *release_above_)
    std::string().swap(pending_);
  if (!in_flight_ && writing_.capacity() > *release_above_)
    std::string().swap(writing_);
  if (pending_.empty() && !in_flight_)
    release_above_.reset();
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
  trim();
  if (epoch != epoch_ || !owner_.on_written(ec))
    return;
  write_pending(); // what was appended meanwhile
}

} // namespace redlockd
