// The step as data: a graph of tasks executed by dependency counters (SimGrid's DAG activities,
// ASTRA-sim's issue_dep_free_nodes). A task becomes ready when its last predecessor finishes;
// what "start" means (a kernel on SMs, a flow over links, a CPU job) is supplied by its owner
// through `on_ready`, which must eventually call `finish`. Stream order and communicator order
// are ordinary edges, added by whoever builds the graph.
#pragma once

#include <cstdint>
#include <functional>
#include <memory_resource>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sim/engine.hpp"
#include "sim/large_pages.hpp"
#include "sim/signal.hpp"

namespace twin::sim {

class TaskGraph;

class Task {
 public:
  enum class State : std::uint8_t { blocked, running, done };

  // Opaque labels for observers: sim/ does not know what they mean. `name` points to static
  // text (a step has millions of tasks: no string per task).
  const char* name = "";
  std::int32_t lane = -1;      // e.g. a rank's stream
  std::int32_t category = -1;  // e.g. a kernel category
  std::int32_t index = -1;     // e.g. a layer

 private:
  std::uint32_t id_ = 0;  // here: fills the padding before on_ready (a step has ~10⁶ tasks)

 public:
  std::function<void(Task&)> on_ready;

  void after(Task& pred);  // `pred` must finish before this task starts
  void finish();           // called by the owner when the work is done
  // The work itself begins now, later than the task became ready (a kernel's first block after
  // it waited for SMs): its start time, as a profiler records it, moves here.
  void mark_started();
  State state() const { return state_; }
  // Calls f(const Task&) for each successor, in the order they were added.
  template <class F>
  void each_successor(F&& f) const;
  Time start_time() const;
  Time end_time() const;
  std::size_t id() const { return id_; }
  TaskGraph& graph() const { return *graph_; }

 private:
  friend class TaskGraph;
  void ready();
  TaskGraph* graph_ = nullptr;
  State state_ = State::blocked;
};

class TaskGraph {
 public:
  explicit TaskGraph(Engine& engine) : engine_(engine) {}
  TaskGraph(const TaskGraph&) = delete;
  TaskGraph& operator=(const TaskGraph&) = delete;

  Task& add(const char* name, std::int32_t lane = -1, std::int32_t category = -1,
            std::int32_t index = -1);
  // Starts every task without predecessors (at the engine's current time).
  void start();
  std::size_t size() const { return tasks_.size(); }
  std::size_t finished() const { return finished_; }
  Task& operator[](std::size_t i) { return tasks_[i]; }
  const Task& operator[](std::size_t i) const { return tasks_[i]; }
  // Task i's start and end, without touching the task.
  Time start_of(std::size_t i) const { return times_[i].start; }
  Time end_of(std::size_t i) const { return times_[i].end; }
  Engine& engine() { return engine_; }
  // Task id's successors' ids, in the order added (for passes over the whole graph).
  std::span<const std::uint32_t> successor_ids(std::size_t id) const {
    const auto [first, last] = successors(static_cast<std::uint32_t>(id));
    return {first, last};
  }

  Signal<const Task&> on_start;
  Signal<const Task&> on_finish;

 private:
  friend class Task;
  Engine& engine_;
  void drain();
  // Dependencies as added (pred → succ, task ids), then per task its successors contiguously
  // (compressed rows: succ_[succ_begin_[i] .. succ_begin_[i + 1]), in the order added), built
  // by one counting sort when the graph starts or is next read: finishing a task reads its
  // successors without chasing a list through memory, and adding one touches neither task.
  struct Edge {
    std::uint32_t from, to;
  };
  void index_successors() const;
  std::pair<const std::uint32_t*, const std::uint32_t*> successors(std::uint32_t id) const {
    if (indexed_edges_ != edges_.size() || succ_begin_.size() != tasks_.size() + 1)
      index_successors();
    return {succ_.data() + succ_begin_[id], succ_.data() + succ_begin_[id + 1]};
  }
  // Chunks of 2 MiB (edges, counters, times) and 5 MiB (tasks: stable addresses).
  Chunked<Edge, 18> edges_;
  mutable std::pmr::vector<std::uint32_t> succ_begin_{&large_pages()}, succ_{&large_pages()};
  mutable std::size_t indexed_edges_ = 0;
  // Unfinished predecessors per task id, apart from the tasks: finishing a task touches its
  // successors' counters, which stay in cache here (a step has ~10⁶ tasks of ~100 bytes).
  Chunked<std::uint32_t, 19> pending_;
  Chunked<Task, 16> tasks_;
  // Start and end per task id, apart from the tasks: reports and the memory replay read them
  // for every task or buffer, and 16 bytes a task stay in cache where 80 would not.
  struct Span {
    Time start, end;
  };
  Chunked<Span, 17> times_;
  std::vector<Task*> ready_queue_;  // drained from ready_head_ on
  std::size_t ready_head_ = 0;
  bool draining_ = false;
  std::size_t finished_ = 0;
};

inline Time Task::start_time() const {
  return graph_->times_[id_].start;
}
inline Time Task::end_time() const {
  return graph_->times_[id_].end;
}

template <class F>
void Task::each_successor(F&& f) const {
  const auto [first, last] = graph_->successors(id_);
  for (auto* s = first; s != last; ++s) f(std::as_const(*graph_)[*s]);
}

}  // namespace twin::sim
