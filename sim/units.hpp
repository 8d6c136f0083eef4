// Time and quantity types of the engine (STYLE.md: "a double that means GB/s is how ASTRA-sim
// users ended up asking what a cycle is").
//
// Time is an integer count of nanoseconds with named constructors (ns-3's MicroSeconds(10)):
// integer time keeps event order exact and output byte-identical across runs. 2^63 ns is 292
// years, far beyond any simulated step. Quantities (bytes, FLOPs, their rates) are thin strong
// types over double, since fluid sharing produces fractional progress.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>

namespace twin::sim {

class Time {
 public:
  constexpr Time() = default;
  static constexpr Time ns(std::int64_t v) { return Time(v); }
  static constexpr Time us(double v) { return Time(round_ns(v * 1e3)); }
  static constexpr Time ms(double v) { return Time(round_ns(v * 1e6)); }
  static constexpr Time s(double v) { return Time(round_ns(v * 1e9)); }
  static constexpr Time max() { return Time(std::numeric_limits<std::int64_t>::max()); }

  constexpr std::int64_t count_ns() const { return ns_; }
  constexpr double to_s() const { return static_cast<double>(ns_) * 1e-9; }
  constexpr double to_ms() const { return static_cast<double>(ns_) * 1e-6; }
  constexpr double to_us() const { return static_cast<double>(ns_) * 1e-3; }

  constexpr auto operator<=>(const Time&) const = default;
  constexpr Time operator+(Time o) const { return Time(ns_ + o.ns_); }
  constexpr Time operator-(Time o) const { return Time(ns_ - o.ns_); }
  constexpr Time& operator+=(Time o) {
    ns_ += o.ns_;
    return *this;
  }
  constexpr Time& operator-=(Time o) {
    ns_ -= o.ns_;
    return *this;
  }

 private:
  constexpr explicit Time(std::int64_t v) : ns_(v) {}
  // Round half away from zero; a time that would overflow saturates at max().
  static constexpr std::int64_t round_ns(double v) {
    if (v >= 9.2e18) return std::numeric_limits<std::int64_t>::max();
    return static_cast<std::int64_t>(v < 0 ? v - 0.5 : v + 0.5);
  }
  std::int64_t ns_ = 0;
};

// A quantity of some dimension, tagged so that bytes and FLOPs never mix.
template <class Tag>
struct Quantity {
  double v = 0;
  constexpr auto operator<=>(const Quantity&) const = default;
  constexpr Quantity operator+(Quantity o) const { return {v + o.v}; }
  constexpr Quantity operator-(Quantity o) const { return {v - o.v}; }
  constexpr Quantity operator*(double k) const { return {v * k}; }
  constexpr Quantity operator/(double k) const { return {v / k}; }
  constexpr double operator/(Quantity o) const { return v / o.v; }
  constexpr Quantity& operator+=(Quantity o) {
    v += o.v;
    return *this;
  }
  constexpr Quantity& operator-=(Quantity o) {
    v -= o.v;
    return *this;
  }
};

struct BytesTag {};
struct FlopsTag {};
using Bytes = Quantity<BytesTag>;
using Flops = Quantity<FlopsTag>;

// Rates are amounts per second.
template <class Tag>
struct Rate {
  double per_s = 0;
  constexpr auto operator<=>(const Rate&) const = default;
};
using BytesPerSec = Rate<BytesTag>;
using FlopsPerSec = Rate<FlopsTag>;

constexpr double kKiB = 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

constexpr Bytes bytes(double v) {
  return {v};
}
constexpr Bytes GiB(double v) {
  return {v * kGiB};
}
constexpr Bytes MiB(double v) {
  return {v * kMiB};
}
constexpr BytesPerSec GBps(double v) {
  return {v * 1e9};
}
constexpr FlopsPerSec TFLOPs(double v) {
  return {v * 1e12};
}

// Time to move `amount` at `rate` (rounded up to the next nanosecond so that an activity is never
// declared finished before its work is done).
template <class Tag>
inline Time duration(Quantity<Tag> amount, Rate<Tag> rate) {
  if (amount.v <= 0) return Time{};
  if (rate.per_s <= 0) return Time::max();
  const double ns = std::ceil(amount.v / rate.per_s * 1e9);
  return ns >= 9.2e18 ? Time::max() : Time::ns(static_cast<std::int64_t>(ns));
}

}  // namespace twin::sim
