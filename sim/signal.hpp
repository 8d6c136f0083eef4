// Observers (SimGrid's on_start_cb plugins, htsim's typed loggers): the engine and the hardware
// emit signals; reports connect to them. A signal with no observer costs one empty-vector check.
#pragma once

#include <functional>
#include <vector>

namespace twin::sim {

template <class... Args>
class Signal {
 public:
  void connect(std::function<void(Args...)> f) { slots_.push_back(std::move(f)); }
  void operator()(Args... args) const {
    for (const auto& s : slots_) s(args...);
  }
  bool connected() const { return !slots_.empty(); }

 private:
  std::vector<std::function<void(Args...)>> slots_;
};

}  // namespace twin::sim
