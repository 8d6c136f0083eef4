// The step as data: a graph of tasks executed by dependency counters (SimGrid's DAG activities,
// ASTRA-sim's issue_dep_free_nodes). A task becomes ready when its last predecessor finishes;
// what "start" means (a kernel on SMs, a flow over links, a CPU job) is supplied by its owner
// through `on_ready`, which must eventually call `finish`. Stream order and communicator order
// are ordinary edges, added by whoever builds the graph.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "sim/engine.hpp"
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
  std::function<void(Task&)> on_ready;

  void after(Task& pred);  // `pred` must finish before this task starts
  void finish();           // called by the owner when the work is done
  State state() const { return state_; }
  const std::vector<Task*>& successors() const { return successors_; }
  Time start_time() const { return start_; }
  Time end_time() const { return end_; }
  std::size_t id() const { return id_; }
  TaskGraph& graph() const { return *graph_; }

 private:
  friend class TaskGraph;
  void ready();
  TaskGraph* graph_ = nullptr;
  std::size_t id_ = 0;
  std::uint32_t pending_ = 0;
  std::vector<Task*> successors_;
  State state_ = State::blocked;
  Time start_{}, end_{};
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
  Engine& engine() { return engine_; }

  Signal<const Task&> on_start;
  Signal<const Task&> on_finish;

 private:
  friend class Task;
  Engine& engine_;
  void drain();
  std::deque<Task> tasks_;  // stable addresses
  std::deque<Task*> ready_queue_;
  bool draining_ = false;
  std::size_t finished_ = 0;
};

}  // namespace twin::sim
