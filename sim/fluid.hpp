// Fluid resource sharing: the one rule for dividing capacity between concurrent flows.
//
// A resource r has a capacity C_r (units per second). A flow f has an amount to move, a bound
// B_f on its rate (∞ if none), uses resources with weights w_{r,f} (it consumes w_{r,f}·ρ_f of r
// at rate ρ_f) and a share φ_f > 0: its speed when alone, min(B_f, min_r C_r / w_{r,f}) unless
// given. Rates are weighted max-min fair, ρ_f = λ_f·φ_f, under
//      Σ_f w_{r,f}·ρ_f ≤ C_r  for every r,     ρ_f ≤ B_f,
// so contending flows are slowed by the same factor of their solo speed: flows of different
// units (SM·seconds of a kernel, bytes of a copy) share HBM meaningfully, two equal flows split a
// link evenly, and a collective with more channels gets proportionally more of a NIC. λ is found
// by progressive filling (SimGrid src/kernel/lmm/maxmin.cpp; Bertsekas & Gallager, Data Networks
// §6.5.2) on w' = w·φ and B' = B/φ: all unfixed flows rise together by
//      δ = min( min_r  remaining_r / Σ_{f unfixed} w'_{r,f},   min_f (B'_f − level) );
// resources that saturate fix their flows, flows that reach their bound are fixed, repeat. What
// a bounded flow leaves unused goes to the others.
//
// Rates are recomputed only when flows start or end or a capacity changes, and only for the
// connected component (flows ↔ resources) that the change touches, once per simulated instant
// (Engine::on_settle). Components are joined only through resources that can saturate: one whose
// flows could not fill it even at their bounds (Σ w·B ≤ C) never binds and is left out. Between
// changes each flow's progress is linear, so its completion is one event; a changed rate
// moves it (Engine::move).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "sim/engine.hpp"
#include "sim/units.hpp"

namespace twin::sim {

class Fluid {
 public:
  using ResourceId = std::uint32_t;
  using FlowId = std::uint32_t;
  static constexpr double kUnbounded = std::numeric_limits<double>::infinity();
  struct Use {
    ResourceId resource;
    double weight;
  };

  explicit Fluid(Engine& engine);
  Fluid(const Fluid&) = delete;
  Fluid& operator=(const Fluid&) = delete;

  ResourceId add_resource(double capacity, std::string name);
  // A link or memory: its capacity in bytes per second.
  ResourceId add_resource(BytesPerSec capacity, std::string name) {
    return add_resource(capacity.per_s, std::move(name));
  }
  void set_capacity(ResourceId r, double capacity);
  // Sets aside `amount` of r's capacity (negative: gives it back); the solver shares
  // max(0, capacity − reserved). For demands that need not take part in the sharing.
  void reserve(ResourceId r, double amount);
  double capacity(ResourceId r) const { return resources_[r].capacity; }
  const std::string& name(ResourceId r) const { return resources_[r].name; }
  std::size_t resource_count() const { return resources_.size(); }

  // Starts a flow of `amount` units; `done` fires (at completion priority) when it is moved.
  // share ≤ 0: the flow's solo speed at start, min(bound, min_r C_r / w_r).
  FlowId start(double amount, std::span<const Use> uses, double bound, std::function<void()> done,
               double share = 0);
  FlowId start(double amount, std::initializer_list<Use> uses, double bound,
               std::function<void()> done, double share = 0) {
    return start(amount, std::span<const Use>(uses.begin(), uses.size()), bound, std::move(done),
                 share);
  }
  void set_bound(FlowId f, double bound);
  // Ends a flow without calling its `done`.
  void cancel(FlowId f);
  double rate(FlowId f) const { return flows_[f].rate; }
  double remaining(FlowId f) const;
  // Total rate currently used of a resource: Σ w·ρ.
  double load(ResourceId r) const;
  // Seconds so far during which the resource was saturated (it fixed flows' rates).
  double saturated_s(ResourceId r) const;
  std::size_t active_flows() const { return active_; }
  std::uint64_t solves() const { return solves_; }

  // Recomputes now (normally the engine does it once per instant).
  void settle();

 private:
  struct Resource {
    double capacity;
    std::string name;
    double reserved = 0;
    double usable() const { return capacity > reserved ? capacity - reserved : 0.0; }
    struct On {
      FlowId flow;
      double weight;
    };
    std::vector<On> flows;  // active flows using it, with their weights
    // Σ weight·bound of its flows with a finite bound, and how many have none: what slack()
    // needs, kept as flows come, go and change bound (so the test reads no flow).
    double demand = 0;
    std::uint32_t unbounded = 0;
    bool dirty = false;
    // scratch for the solver
    double rem = 0, wsum = 0;
    std::uint32_t unfixed = 0;
    std::uint32_t mark = 0;     // epoch in which a component search saw it
    std::uint32_t visited = 0;  // epoch in which its flows were taken into a component
    bool binding = false;       // in the component being solved (not slack)
    bool saturated = false;
    Time saturated_since{};
    double saturated_total_s = 0;
  };
  void set_saturated(Resource& r, bool now_saturated);
  // Adds (sign +1) or removes (−1) a flow's bound from the demand of the resources it uses.
  void count_demand(FlowId id, double sign);
  struct Flow {
    double remaining = 0;
    double rate = 0;
    double bound = kUnbounded;
    double share = 1;
    Time since{};
    std::vector<Use> uses;
    std::function<void()> done;
    EventId completion;  // pending while the flow runs at a rate > 0
    bool active = false;
    std::uint32_t mark = 0;
    bool fixed = false;
    std::uint32_t slot = 0;  // scratch: its index in the component being solved
  };

  void mark_dirty(const Flow& f);
  bool slack(ResourceId r) const;
  void advance(Flow& f);
  void solve_component(ResourceId seed, std::vector<FlowId>& comp_flows,
                       std::vector<ResourceId>& comp_res);
  void solve_isolated(FlowId f);
  void progressive_filling(const std::vector<FlowId>& flows, const std::vector<ResourceId>& res);
  void reschedule(FlowId f);
  void complete(FlowId id);
  void detach(FlowId f);

  Engine& engine_;
  std::vector<Resource> resources_;
  std::vector<Flow> flows_;
  std::vector<FlowId> free_flows_;
  std::vector<ResourceId> dirty_;
  std::vector<FlowId> dirty_isolated_;  // flows that use no resource (bound only)
  // Scratch buffers reused by every solve (no allocation on the hot path).
  std::vector<ResourceId> dirty_scratch_, comp_res_;
  std::vector<FlowId> iso_scratch_, comp_flows_;
  std::vector<double> old_rates_;
  std::vector<ResourceId> active_res_, saturated_res_;
  std::vector<FlowId> unfixed_flows_;
  // Scratch of progressive filling: the uses of the component's flows on binding resources,
  // flow by flow (slot i's are binding_uses_[binding_begin_[i] .. binding_begin_[i+1])).
  std::vector<Use> binding_uses_;
  std::vector<std::uint32_t> binding_begin_;
  std::uint32_t epoch_ = 0;
  std::size_t active_ = 0;
  std::uint64_t solves_ = 0;
};

}  // namespace twin::sim
