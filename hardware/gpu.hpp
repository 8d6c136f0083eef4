// A GPU's streaming multiprocessors as a resource (SPEC.md §6.5, §6.13).
//
// SMs are *held* by NCCL CTAs and by the blocks of persistent kernels: one SM each, for as long
// as they run. Requests for SMs are served first come, first served, one SM at a time as SMs
// free (the block scheduler dispatches a waiting block to the next SM that frees). Ordinary grid
// kernels (many short CTAs) do not hold SMs: they share, through the fluid solver, the SMs
// nobody holds — the capacity of the `free_sms` resource.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>

#include "sim/fluid.hpp"
#include "sim/signal.hpp"

namespace twin::hardware {

// Told whenever the GPU's free SMs change (a running kernel whose speed depends on them). An
// intrusive list node, so that listening costs no allocation (it lives in the cluster's arena).
struct SmListener {
  void (*on_free)(SmListener* self, int free) = nullptr;
  SmListener* prev = nullptr;
  SmListener* next = nullptr;
};

class Gpu {
 public:
  enum class Holder : std::uint8_t { nccl, persistent };
  using Grant = std::function<void(int granted)>;
  using RequestId = std::uint64_t;

  // `reserved` SMs are held for the GPU's whole life (another library, a side job). Kernels may
  // run faster per SM than nominal when few SMs are busy (contention.hpp: power-capped clocks):
  // the SM resource offers free SMs × `sm_boost_max` so that such rates fit.
  Gpu(sim::Fluid& fluid, int index, int sm_count, double hbm_Bps, double speed = 1.0,
      int reserved = 0, double sm_boost_max = 1.0);

  int index() const { return index_; }
  int sm_count() const { return sm_count_; }
  int free_sms() const { return free_; }
  int nccl_sms() const { return held_nccl_; }
  // Compute speed relative to nominal (kernels take alone_s / speed).
  double speed() const { return speed_; }
  sim::Fluid::ResourceId sm_resource() const { return sm_res_; }
  sim::Fluid::ResourceId hbm_resource() const { return hbm_res_; }

  // Asks for n SMs; `grant(k)` is called each time k more are assigned (possibly at once).
  RequestId request(int n, Holder who, Grant grant);
  // Withdraws what is still ungranted of a request (a dynamic kernel that ran out of tiles).
  void cancel(RequestId id);
  void release(int n, Holder who);

  // Fires with (gpu index, SMs held by NCCL) whenever that number changes.
  sim::Signal<int, int> on_nccl_sms;

  void listen(SmListener* l);
  void unlisten(SmListener* l);

 private:
  struct Request {
    RequestId id;
    int missing;
    Holder who;
    Grant grant;
  };
  void serve();
  void hold(int n, Holder who);
  void changed();

  sim::Fluid& fluid_;
  int index_;
  int sm_count_;
  double speed_;
  int free_;
  int held_nccl_ = 0;
  double sm_boost_max_;
  SmListener* listeners_ = nullptr;
  sim::Fluid::ResourceId sm_res_;
  sim::Fluid::ResourceId hbm_res_;
  std::deque<Request> waiting_;
  RequestId next_id_ = 1;
  bool serving_ = false;
};

}  // namespace twin::hardware
