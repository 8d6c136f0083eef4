// A GPU's streaming multiprocessors as a resource (JOB.md §6.5, §6.13).
//
// SMs are *held* by NCCL CTAs and by the blocks of persistent kernels: one SM each, for as long
// as they run. Ordinary grid kernels (many short CTAs) do not hold SMs: they take the SMs nobody
// holds, and run at the speed their contention model gives for those SMs (contention.hpp; a
// kernel's speed is not linear in its SMs, so this is not the fluid solver's to divide).
//
// Who gets an SM that frees follows the block scheduler as measured on our H200
// (reports/calibration/contention/, "Who gets an SM", calibrate/sm_arbitration_probe.py): work
// is served in the order it arrived, except that work of a high-priority stream goes before
// all waiting work of normal priority. A grid kernel keeps dispatching its blocks until it has
// none left, so work of normal priority that arrives while an earlier grid kernel runs — a
// persistent kernel, another grid kernel — waits for it to end (measured: 400 µs behind 8
// waves of blocks), while high-priority work takes SMs as the kernel's blocks end (within one
// block: the twin takes them at once). A grid kernel behind another, behind a request still
// waiting for SMs (even where its blocks would fit beside NCCL's CTAs: head-of-line, measured),
// or finding every SM held with no room beside NCCL's CTAs, waits: it makes no progress. Requests
// for SMs are granted one SM at a time as SMs free. Each kernel and collective carries its stream's
// priority (the step builder's: FSDP2 creates its all-gather and reduce-scatter streams at priority
// −1, `FSDPCommContext.lazy_init`; the compute stream and NCCL's internal ones have the default).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>

#include "sim/fluid.hpp"
#include "sim/signal.hpp"

namespace twin::hardware {

// A running grid kernel, told the free SMs it gets whenever that changes (SMs taken or freed,
// grid kernels starting or ending): all of them for the first kernel in order, kBehind for the
// others. An intrusive list node in order, so that listening costs no allocation (it lives in
// the cluster's arena).
struct SmListener {
  static constexpr int kBehind = -1;  // another grid kernel dispatches first: this one waits
  void (*on_share)(SmListener* self, int sms) = nullptr;
  SmListener* prev = nullptr;
  SmListener* next = nullptr;
  std::uint64_t order = 0;  // set by Gpu::listen
};

class Gpu {
 public:
  enum class Holder : std::uint8_t { nccl, persistent };
  enum class Priority : std::uint8_t { high, normal };  // the launching stream's
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
  RequestId request(int n, Holder who, Grant grant, Priority p = Priority::high);
  // Withdraws what is still ungranted of a request (a dynamic kernel that ran out of tiles).
  void cancel(RequestId id);
  void release(int n, Holder who);

  // Fires with (gpu index, SMs held by NCCL) whenever that number changes.
  sim::Signal<int, int> on_nccl_sms;

  // Grid kernels: join (told the new shares at once, as is everyone else) and leave.
  void listen(SmListener* l, Priority p);
  void unlisten(SmListener* l);
  // The free SMs grid kernel l gets: all for the first in order unless a request that came
  // before it still waits for SMs (its blocks wait behind those CTAs even where they would fit
  // beside NCCL's: measured), SmListener::kBehind otherwise.
  int share_of(const SmListener* l) const {
    const bool first = l == listeners_ && (waiting_.empty() || l->order < waiting_.front().order);
    return first ? free_ : SmListener::kBehind;
  }

 private:
  struct Request {
    RequestId id;
    std::uint64_t order;
    int missing;
    Holder who;
    Grant grant;
  };
  // Arrival order, high priority before normal: what the block scheduler serves first.
  std::uint64_t next_order(Priority p) {
    return (p == Priority::normal ? std::uint64_t{1} << 63 : 0) | next_order_++;
  }
  void serve();
  void hold(int n, Holder who);
  void changed();

  sim::Fluid& fluid_;
  int index_;
  int sm_count_;
  double speed_;
  int free_;
  int held_nccl_ = 0;
  SmListener* listeners_ = nullptr;  // in order
  SmListener* last_ = nullptr;
  sim::Fluid::ResourceId hbm_res_;
  std::deque<Request> waiting_;
  RequestId next_id_ = 1;
  std::uint64_t next_order_ = 0;
  bool serving_ = false;
};

}  // namespace twin::hardware
