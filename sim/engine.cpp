#include "sim/engine.hpp"

#include <fmt/format.h>

namespace twin::sim {

Engine::Key Engine::key(Time t, Priority p, std::uint32_t slot) {
  if (t < now_) throw std::logic_error("event scheduled in the past");
  return {t.count_ns(), (static_cast<std::uint64_t>(p) << 56) | seq_++, slot};
}

EventId Engine::at(Time t, Callback cb, Priority p) {
  std::uint32_t slot;
  if (free_slots_.empty()) {
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.push_back(std::move(cb));
    place_.push_back(kNotQueued);
    generation_.push_back(0);
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
    slots_[slot] = std::move(cb);
  }
  const Key k = key(t, p, slot);
  heap_.emplace_back();
  sift_up(heap_.size() - 1, k);
  return {slot, generation_[slot]};
}

bool Engine::cancel(EventId e) {
  if (!queued(e)) return false;
  remove_at(place_[e.slot]);
  slots_[e.slot] = nullptr;
  release(e.slot);
  return true;
}

bool Engine::move(EventId e, Time t, Priority p) {
  if (!queued(e)) return false;
  const std::size_t i = place_[e.slot];
  const Key k = key(t, p, e.slot);
  // Rises if it now precedes its parent, else sinks (or stays).
  if (i > 0 && k < heap_[(i - 1) / 2])
    sift_up(i, k);
  else
    sift_down(i, k);
  return true;
}

void Engine::sift_up(std::size_t i, Key k) {
  while (i > 0) {
    const std::size_t parent = (i - 1) / 2;
    if (!(k < heap_[parent])) break;
    put(i, heap_[parent]);
    i = parent;
  }
  put(i, k);
}

void Engine::sift_down(std::size_t i, Key k) {
  const std::size_t n = heap_.size();
  for (;;) {
    std::size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && heap_[child + 1] < heap_[child]) ++child;
    if (!(heap_[child] < k)) break;
    put(i, heap_[child]);
    i = child;
  }
  put(i, k);
}

void Engine::remove_at(std::size_t i) {
  place_[heap_[i].slot] = kNotQueued;
  const Key last = heap_.back();
  heap_.pop_back();
  if (i == heap_.size()) return;
  if (i > 0 && last < heap_[(i - 1) / 2])
    sift_up(i, last);
  else
    sift_down(i, last);
}

void Engine::release(std::uint32_t slot) {
  ++generation_[slot];
  free_slots_.push_back(slot);
}

void Engine::settle() {
  for (auto& h : settle_hooks_) h();
}

std::uint64_t Engine::run(Time until) {
  const std::uint64_t start = processed_;
  settle();
  while (!heap_.empty()) {
    if (heap_.front().t > until.count_ns()) break;
    const Key k = heap_.front();
    remove_at(0);
    // The next event's callback is read after this one runs: ask for it now (slots are reused
    // in no particular order, so it is rarely the line just read).
    if (!heap_.empty()) __builtin_prefetch(&slots_[heap_.front().slot]);
    now_ = Time::ns(k.t);
    Callback cb = std::move(slots_[k.slot]);
    release(k.slot);
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
