// A GPU's streaming multiprocessors as a resource (JOB.md §6.5, §6.13).
//
// SMs are *held* by NCCL CTAs and by the blocks of persistent kernels: one SM each, for as long
// as they run. Requests for SMs are served first come, first served, one SM at a time as SMs
// free (the block scheduler dispatches a waiting block to the next SM that frees). Ordinary grid
// kernels (many short CTAs) do not hold SMs: the ones running share the SMs nobody holds
// equally, and each runs at the speed its contention model gives for its share (contention.hpp;
// a kernel's speed is not linear in its SMs, so this is not the fluid solver's to divide).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>

#include "sim/fluid.hpp"
#include "sim/signal.hpp"

namespace twin::hardware {

// A running grid kernel, told its share of the free SMs whenever it changes (SMs taken or
// freed, grid kernels starting or ending). An intrusive list node, so that listening costs no
// allocation (it lives in the cluster's arena).
struct SmListener {
  void (*on_share)(SmListener* self, int sms) = nullptr;
  SmListener* prev = nullptr;
  SmListener* next = nullptr;
};

class Gpu {
 public:
  enum class Holder : std::uint8_t { nccl, persistent };
  using Grant = std::function<void(int granted)>;
  using RequestId = std::uint64_t;

  // `reserved` SMs are held for the GPU's whole life (another library, a side job).
  Gpu(sim::Fluid& fluid, int index, int sm_count, double hbm_Bps, double speed = 1.0,
      int reserved = 0);

  int index() const { return index_; }
  int sm_count() const { return sm_count_; }
  int free_sms() const { return free_; }
  int nccl_sms() const { return held_nccl_; }
  // Compute speed relative to nominal (kernels take alone_s / speed).
  double speed() const { return speed_; }
  void set_speed(double s) { speed_ = s; }
  sim::Fluid::ResourceId hbm_resource() const { return hbm_res_; }

  // Asks for n SMs; `grant(k)` is called each time k more are assigned (possibly at once).
  RequestId request(int n, Holder who, Grant grant);
  // Withdraws what is still ungranted of a request (a dynamic kernel that ran out of tiles).
  void cancel(RequestId id);
  void release(int n, Holder who);

  // Fires with (gpu index, SMs held by NCCL) whenever that number changes.
  sim::Signal<int, int> on_nccl_sms;

  // Grid kernels: join (told the new shares at once, as is everyone else) and leave.
  void listen(SmListener* l);
  void unlisten(SmListener* l);
  // The free SMs each running grid kernel gets.
  int grid_share() const { return free_ / std::max(1, grid_kernels_); }

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
  SmListener* listeners_ = nullptr;
  int grid_kernels_ = 0;
  sim::Fluid::ResourceId hbm_res_;
  std::deque<Request> waiting_;
  RequestId next_id_ = 1;
  bool serving_ = false;
};

}  // namespace twin::hardware
