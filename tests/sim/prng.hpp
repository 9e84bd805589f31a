// The simulator's only source of randomness: a seeded PRNG (xoshiro256**, seeded through
// splitmix64). Every choice of a run comes from the run's seed through one of these, so that
// `redlockd-sim --seed S` replays bit for bit. Nothing here reads the clock or the OS.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>

namespace redlockd::sim {

class prng {
 public:
  explicit prng(std::uint64_t seed) {
    for (auto& word : state_)
      word = splitmix(seed);
  }

  std::uint64_t next() {
    const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const std::uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, n); 0 when n is 0. The tiny modulo bias does not matter here.
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : next() % n; }
  // Uniform in [lo, hi].
  std::int64_t between(std::int64_t lo, std::int64_t hi) {
    return hi <= lo
               ? lo
               : lo + static_cast<std::int64_t>(below(static_cast<std::uint64_t>(hi - lo) + 1));
  }
  // Uniform in [0, 1).
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  bool chance(double p) { return unit() < p; }
  // A log-uniform value in [lo, hi] (lo >= 1): as many short as long ones, per decade.
  std::int64_t log_between(std::int64_t lo, std::int64_t hi) {
    if (hi <= lo)
      return lo;
    const double a = std::log(static_cast<double>(lo));
    const double b = std::log(static_cast<double>(hi) + 1.0);
    const auto v = static_cast<std::int64_t>(std::exp(a + (b - a) * unit()));
    return v < lo ? lo : v > hi ? hi : v;
  }
  // An exponentially distributed wait with the given mean, at least 1.
  std::int64_t exponential(double mean) {
    const auto v = static_cast<std::int64_t>(-std::log(1.0 - unit()) * mean);
    return v < 1 ? 1 : v;
  }

  // An independent stream for a part of the simulation (a master, a daemon, the clients), so
  // that a change in how often one part draws does not shift every other part's choices.
  prng fork() { return prng(next()); }

  void fill(std::span<std::uint8_t> out) {
    std::size_t i = 0;
    while (i < out.size()) {
      std::uint64_t word = next();
      for (int b = 0; b < 8 && i < out.size(); ++b, ++i, word >>= 8)
        out[i] = static_cast<std::uint8_t>(word);
    }
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static std::uint64_t splitmix(std::uint64_t& x) {
    std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  std::uint64_t state_[4];
};

} // namespace redlockd::sim
