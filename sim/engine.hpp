// The discrete-event engine: a value (no globals), so several run in one process and in threads.
//
// Events are ordered by (time, priority class, insertion sequence) — ns-3's EventKey — and never
// by pointer or hash order, so the same inputs give the same order and byte-identical outputs.
// Within one instant, lower priority classes fire first: completions free resources before
// starts claim them.
//
// Callbacks live in a slot table and the heap holds 24-byte keys, so heap moves stay cheap. The
// heap is indexed (each slot knows its key's place), so a pending event can be cancelled or
// re-timed in place: a fluid flow whose rate changes moves its one completion rather than
// leaving a stale one behind to be popped and ignored (a quarter of a 384-GPU step's events
// were such, issue #21). A re-timed event takes a new insertion sequence, so the order of the
// events that fire is exactly as if it had been cancelled and scheduled anew.
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

// A scheduled event, for cancel() and move(); stays harmless after the event ran (its slot's
// generation has moved on).
struct EventId {
  std::uint32_t slot = ~0U;
  std::uint32_t generation = 0;
};

class Engine {
 public:
  using Callback = std::function<void()>;

  Time now() const { return now_; }
  EventId at(Time t, Callback cb, Priority p = Priority::normal);
  EventId after(Time dt, Callback cb, Priority p = Priority::normal) {
    return at(now_ + dt, std::move(cb), p);
  }
  // Removes a pending event. False if it already ran or was cancelled.
  bool cancel(EventId e);
  // Re-times a pending event (same callback; ordered as one scheduled now). False if it already
  // ran or was cancelled.
  bool move(EventId e, Time t, Priority p = Priority::normal);
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
    bool operator<(const Key& o) const { return t != o.t ? t < o.t : seq_prio < o.seq_prio; }
  };
  static constexpr std::uint32_t kNotQueued = ~0U;
  Key key(Time t, Priority p, std::uint32_t slot);
  bool queued(EventId e) const {
    return e.slot < slots_.size() && generation_[e.slot] == e.generation &&
           place_[e.slot] != kNotQueued;
  }
  void settle();
  void put(std::size_t i, const Key& k) {
    heap_[i] = k;
    place_[k.slot] = static_cast<std::uint32_t>(i);
  }
  void sift_up(std::size_t i, Key k);
  void sift_down(std::size_t i, Key k);
  // Takes the key at heap place i out (its slot is then free to reuse).
  void remove_at(std::size_t i);
  void release(std::uint32_t slot);

  Time now_{};
  std::uint64_t seq_ = 0;
  std::uint64_t processed_ = 0;
  std::uint64_t event_limit_ = ~0ULL;
  std::vector<Key> heap_;  // a binary min-heap of keys
  std::vector<Callback> slots_;
  std::vector<std::uint32_t> place_;       // per slot: its key's place in heap_, or kNotQueued
  std::vector<std::uint32_t> generation_;  // per slot: bumped each time the slot is released
  std::vector<std::uint32_t> free_slots_;
  std::vector<Callback> settle_hooks_;
};

}  // namespace twin::sim
