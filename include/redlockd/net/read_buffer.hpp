// The buffer a connection reads into, sized by what the reads bring: small while the peer is
// quiet (an idle connection holds little), grown at once when a read fills it (a pipelining
// peer is read in large chunks), and given back when a read shows the burst is over. What a
// read brought is consumed before the next read, so resizing never moves bytes. Pure: no I/O.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

namespace redlockd {

class read_buffer {
 public:
  // Reads go into `small` bytes until one fills them; then into `large` bytes until one brings
  // no more than `small` bytes.
  read_buffer(std::size_t small, std::size_t large);

  // Where the next read goes.
  std::span<char> space() { return {data_.get(), size_}; }
  // The last read put `n` bytes at the start of space(), and they have been consumed: the size
  // for the next read follows from `n`. Allocates only when the size changes. True when the
  // read brought no more than `small` bytes: a burst, if there was one, is over.
  bool filled(std::size_t n);

  std::size_t size() const { return size_; }

 private:
  void resize(std::size_t size);

  std::size_t small_;
  std::size_t large_;
  std::size_t size_ = 0;
  std::unique_ptr<char[]> data_;
};

} // namespace redlockd
