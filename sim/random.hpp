// A small deterministic random source. The standard library's distributions are
// implementation-defined (libstdc++ and libc++ draw different values from the same engine), so
// twin draws its own: SplitMix64 (Steele, Lea, Flood 2014) and Box–Muller normals. Same seed ⇒
// same stream on every platform with IEEE doubles and the same libm.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>

namespace twin::sim {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1): 53 random bits, never exactly 0.
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }
  // Uniform integer in [0, n), n > 0 (multiply-shift; bias below 2^-64·n, irrelevant here).
  std::uint64_t below(std::uint64_t n) {
    __extension__ using u128 = unsigned __int128;
    return static_cast<std::uint64_t>((static_cast<u128>(next()) * n) >> 64);
  }
  double normal() {
    const double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }
  // Fisher–Yates shuffle of a random-access range.
  template <class Vec>
  void shuffle(Vec& v) {
    for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(i)]);
  }

 private:
  std::uint64_t state_;
};

}  // namespace twin::sim
