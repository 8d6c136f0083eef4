// The discrete-event engine: a value (no globals), so several run in one process and in threads.
//
// Events are ordered by (time, priority class, insertion sequence) — ns-3's EventKey — and never
// by pointer or hash order, so the same inputs give the same order and byte-identical outputs.
// Within one instant, lower priority classes fire first: completions free resources before
// starts claim them.
//
// Callbacks live in a slot table and the heap holds 24-byte keys, so heap moves stay cheap.
// Hooks registered with `on_settle` run whenever the current instant's events are exhausted,
// before time advances: the fluid solver recomputes rates there once per instant, not once per
// change (SimGrid's lazy LMM update).
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <vector>

#include "sim/units.hpp"

namespace twin::sim {

enum class Priority : std::uint8_t { completion = 0, normal = 1, start = 2 };

// Thrown when a run exceeds its event budget (a resource limit, not a bug).
struct EventLimitExceeded : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Engine {
 public:
  using Callback = std::function<void()>;

  Time now() const { return now_; }
  void at(Time t, Callback cb, Priority p = Priority::normal);
  void after(Time dt, Callback cb, Priority p = Priority::normal) {
    at(now_ + dt, std::move(cb), p);
  }
  void on_settle(Callback hook) { settle_hooks_.push_back(std::move(hook)); }

  // Runs until no event is left (or the next one is after `until`). Returns events processed.
  std::uint64_t run(Time until = Time::max());
  std::uint64_t events_processed() const { return processed_; }
  std::size_t pending() const { return heap_.size(); }
  void set_event_limit(std::uint64_t n) { event_limit_ = n; }

 private:
  struct Key {
    std::int64_t t;
    std::uint64_t seq_prio;  // priority in the top 8 bits, insertion sequence below
    std::uint32_t slot;
    bool operator>(const Key& o) const { return t != o.t ? t > o.t : seq_prio > o.seq_prio; }
  };
  void settle();
  void push(Key k);
  Key pop();

  Time now_{};
  std::uint64_t seq_ = 0;
  std::uint64_t processed_ = 0;
  std::uint64_t event_limit_ = ~0ULL;
  std::vector<Key> heap_;
  std::vector<Callback> slots_;
  std::vector<std::uint32_t> free_slots_;
  std::vector<Callback> settle_hooks_;
};

}  // namespace twin::sim
