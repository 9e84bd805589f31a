// The read buffer's sizing (see read_buffer.hpp).
#include "redlockd/net/read_buffer.hpp"

#include <algorithm>

namespace redlockd {

read_buffer::read_buffer(std::size_t small, std::size_t large)
    : small_(small), large_(std::max(small, large)) {
  resize(small_);
}

bool read_buffer::filled(std::size_t n) {
  // Between the two bounds the size stays: a busy peer whose reads vary does not make the
  // buffer flip back and forth.
  const bool full = n >= size_;
  if (full && size_ < large_)
    resize(large_);
  else if (!full && n <= small_ && size_ > small_)
    resize(small_);
  return !full && n <= small_;
}

void read_buffer::resize(std::size_t size) {
  data_ = std::make_unique_for_overwrite<char[]>(size);
  size_ = size;
}

} // namespace redlockd
