// The step as data: a graph of tasks executed by dependency counters (SimGrid's DAG activities,
// ASTRA-sim's issue_dep_free_nodes). A task becomes ready when its last predecessor finishes;
// what "start" means (a kernel on SMs, a flow over links, a CPU job) is supplied by its owner
// through `on_ready`, which must eventually call `finish`. Stream order and communicator order
// are ordinary edges, added by whoever builds the graph.
#pragma once

#include <cstdint>
#include <functional>
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
  // Successors as a list in the graph's edge pool (index + 1; 0 = none): no allocation per task.
  std::uint32_t first_edge_ = 0, last_edge_ = 0;
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

  Signal<const Task&> on_start;
  Signal<const Task&> on_finish;

 private:
  friend class Task;
  Engine& engine_;
  void drain();
  struct Edge {
    std::uint32_t to;    // task id
    std::uint32_t next;  // index + 1 of the next edge of the same task; 0 = last
  };
  // Chunks of 2 MiB (edges, counters, times) and 5 MiB (tasks: stable addresses).
  Chunked<Edge, 18> edges_;
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
  for (std::uint32_t e = first_edge_; e != 0; e = graph_->edges_[e - 1].next)
    f(std::as_const(*graph_)[graph_->edges_[e - 1].to]);
}

}  // namespace twin::sim
