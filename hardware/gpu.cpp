#include "hardware/gpu.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace twin::hardware {

Gpu::Gpu(sim::Fluid& fluid, int index, int sm_count, double hbm_Bps, double speed, int reserved)
    : fluid_(fluid),
      index_(index),
      sm_count_(sm_count),
      speed_(speed),
      free_(sm_count - std::clamp(reserved, 0, sm_count - 1)) {
  hbm_res_ = fluid_.add_resource(hbm_Bps, "gpu" + std::to_string(index) + ".hbm");
}

Gpu::RequestId Gpu::request(int n, Holder who, Grant grant, Priority p) {
  if (n <= 0 || n > sm_count_) throw std::invalid_argument("SM request out of range");
  const RequestId id = next_id_++;
  const std::uint64_t order = next_order(p);
  // In order: a high-priority request goes before the waiting ones of normal priority.
  const auto at = std::find_if(waiting_.begin(), waiting_.end(),
                               [order](const Request& r) { return r.order > order; });
  waiting_.insert(at, {id, order, n, who, std::move(grant)});
  serve();
  if (!waiting_.empty()) changed();  // a grid kernel that came after it now waits behind it
  return id;
}

void Gpu::cancel(RequestId id) {
  auto it =
      std::find_if(waiting_.begin(), waiting_.end(), [id](const Request& r) { return r.id == id; });
  if (it == waiting_.end()) return;
  waiting_.erase(it);
  changed();  // a grid kernel behind it may run
}

void Gpu::hold(int n, Holder who) {
  free_ -= n;
  if (who == Holder::nccl) {
    held_nccl_ += n;
    on_nccl_sms(index_, held_nccl_);
  }
}

void Gpu::changed() {
  for (SmListener* l = listeners_; l; l = l->next) l->on_share(l, share_of(l));
}

void Gpu::listen(SmListener* l, Priority p) {
  l->order = next_order(p);
  SmListener* before = last_;  // the list is short (the kernels running at once): walk back
  while (before && before->order > l->order) before = before->prev;
  l->prev = before;
  l->next = before ? before->next : listeners_;
  (l->next ? l->next->prev : last_) = l;
  (before ? before->next : listeners_) = l;
  changed();
}

void Gpu::unlisten(SmListener* l) {
  (l->prev ? l->prev->next : listeners_) = l->next;
  (l->next ? l->next->prev : last_) = l->prev;
  l->prev = l->next = nullptr;
  serve();  // work that waited behind this kernel, before the grid kernels are told the rest
  changed();
}

void Gpu::release(int n, Holder who) {
  free_ += n;
  if (free_ > sm_count_) throw std::logic_error("more SMs released than held");
  if (who == Holder::nccl) {
    held_nccl_ -= n;
    on_nccl_sms(index_, held_nccl_);
  }
  serve();  // the waiting requests first: a grid kernel is told only what they leave
  changed();
}

void Gpu::serve() {
  if (serving_) return;  // a grant callback released or requested: the outer loop continues
  serving_ = true;
  while (free_ > 0 && !waiting_.empty()) {
    Request& r = waiting_.front();
    if (listeners_ && listeners_->order < r.order) break;  // it dispatches its blocks first
    const int k = std::min(free_, r.missing);
    r.missing -= k;
    hold(k, r.who);
    // The grant may request or release (and so touch waiting_): call it from a local. A whole
    // grant, the usual case, moves it; a partial one copies it (the request stays).
    Grant grant = r.missing == 0 ? std::move(r.grant) : r.grant;
    if (r.missing == 0) waiting_.pop_front();
    changed();  // after the pop: a grid kernel behind this request may run now
    grant(k);
  }
  serving_ = false;
}

}  // namespace twin::hardware
