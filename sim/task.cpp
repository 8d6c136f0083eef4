#include "sim/task.hpp"

#include <new>
#include <stdexcept>

namespace twin::sim {

void Task::after(Task& pred) {
  if (pred.state_ == State::done) return;
  if (state_ != State::blocked) throw std::logic_error("dependency added to a started task");
  auto& edges = graph_->edges_;
  if (edges.size() >= 0xffffffffULL) throw std::length_error("too many task dependencies");
  edges.emplace_back(pred.id_, id_);
  ++graph_->pending_[id_];
}

void Task::ready() {
  state_ = State::running;
  graph_->times_[id_].start = graph_->engine_.now();
  graph_->on_start(*this);
  if (on_ready) {
    // Its successors' counters and tasks are read when it finishes, after other events: ask for
    // them now, so they are in cache then rather than missed one by one.
    const auto [first, last] = graph_->successors(id_);
    for (auto* s = first; s != last; ++s) {
      __builtin_prefetch(&graph_->pending_[*s], 1);
      __builtin_prefetch(&(*graph_)[*s], 1);
    }
    on_ready(*this);
  } else {
    finish();  // a pure dependency marker
  }
}

void Task::mark_started() {
  if (state_ == State::running) graph_->times_[id_].start = graph_->engine_.now();
}

void Task::finish() {
  if (state_ != State::running)
    throw std::logic_error(std::string("task finished twice or before start: ") + name);
  state_ = State::done;
  graph_->times_[id_].end = graph_->engine_.now();
  ++graph_->finished_;
  graph_->on_finish(*this);
  auto& g = *graph_;
  const auto [first, last] = g.successors(id_);
  for (auto* s = first; s != last; ++s)
    if (--g.pending_[*s] == 0) {
      __builtin_prefetch(&g[*s]);  // ready() reads it next: overlap the successors' misses
      g.ready_queue_.push_back(&g[*s]);
    }
  graph_->drain();
}

// Iterative, so that long chains of tasks finishing at once cannot overflow the stack.
void TaskGraph::drain() {
  if (draining_) return;
  draining_ = true;
  while (ready_head_ < ready_queue_.size()) ready_queue_[ready_head_++]->ready();
  ready_queue_.clear();
  ready_head_ = 0;
  draining_ = false;
}

Task& TaskGraph::add(const char* name, std::int32_t lane, std::int32_t category,
                     std::int32_t index) {
  if (tasks_.size() >= 0xffffffffULL) throw std::length_error("too many tasks");
  pending_.emplace_back(0u);
  times_.emplace_back();
  Task& t = tasks_.emplace_back();
  t.graph_ = this;
  t.id_ = static_cast<std::uint32_t>(tasks_.size() - 1);
  t.name = name;
  t.lane = lane;
  t.category = category;
  t.index = index;
  return t;
}

void TaskGraph::index_successors() const {
  const std::size_t n = tasks_.size(), m = edges_.size();
  succ_begin_.assign(n + 1, 0);
  for (std::size_t e = 0; e < m; ++e) ++succ_begin_[edges_[e].from + 1];
  for (std::size_t i = 0; i < n; ++i) succ_begin_[i + 1] += succ_begin_[i];
  succ_.resize(m);
  std::pmr::vector<std::uint32_t> at(succ_begin_.begin(), succ_begin_.end() - 1, &large_pages());
  for (std::size_t e = 0; e < m; ++e) succ_[at[edges_[e].from]++] = edges_[e].to;
  indexed_edges_ = m;
}

void TaskGraph::start() {
  index_successors();
  std::vector<Task*> roots;
  for (std::size_t i = 0; i < tasks_.size(); ++i) {
    Task& t = (*this)[i];
    if (pending_[i] == 0 && t.state_ == Task::State::blocked) roots.push_back(&t);
  }
  for (Task* t : roots) ready_queue_.push_back(t);
  drain();
}

}  // namespace twin::sim
