#include "sim/engine.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace twin::sim {

void Engine::at(Time t, Callback cb, Priority p) {
  if (t < now_) throw std::logic_error("event scheduled in the past");
  std::uint32_t slot;
  if (free_slots_.empty()) {
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.push_back(std::move(cb));
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
    slots_[slot] = std::move(cb);
  }
  push({t.count_ns(), (static_cast<std::uint64_t>(p) << 56) | seq_++, slot});
}

void Engine::push(Key k) {
  heap_.push_back(k);
  std::push_heap(heap_.begin(), heap_.end(), std::greater<>{});
}

Engine::Key Engine::pop() {
  std::pop_heap(heap_.begin(), heap_.end(), std::greater<>{});
  Key k = heap_.back();
  heap_.pop_back();
  return k;
}

void Engine::settle() {
  for (auto& h : settle_hooks_) h();
}

std::uint64_t Engine::run(Time until) {
  const std::uint64_t start = processed_;
  settle();
  while (!heap_.empty()) {
    if (heap_.front().t > until.count_ns()) break;
    const Key k = pop();
    // The next event's callback is read after this one runs: ask for it now (slots are reused
    // in no particular order, so it is rarely the line just read).
    if (!heap_.empty()) __builtin_prefetch(&slots_[heap_.front().slot]);
    now_ = Time::ns(k.t);
    Callback cb = std::move(slots_[k.slot]);
    free_slots_.push_back(k.slot);
    if (++processed_ > event_limit_)
      throw EventLimitExceeded(
          fmt::format("the simulation exceeded its budget of {} events", event_limit_));
    cb();
    // The instant is over when the next event is later (or none is left): settle before moving.
    if (heap_.empty() || heap_.front().t != k.t) settle();
  }
  return processed_ - start;
}

}  // namespace twin::sim
