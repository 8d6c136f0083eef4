// The machine as resources of the fluid solver: per GPU its SMs and HBM (gpu.hpp), NVLink in
// and out, one NVLink resource per ordered GPU pair of a node, its NIC's two directions, the
// host link (C2C or PCIe) per direction, and the CPU cores serving its rank. Hardware declares
// constraints here; it never divides bandwidth itself (the solver does).
#pragma once

#include <memory>
#include <memory_resource>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "hardware/gpu.hpp"
#include "hardware/placement.hpp"
#include "hardware/power.hpp"
#include "hardware/profile.hpp"
#include "hardware/topology.hpp"
#include "sim/fluid.hpp"
#include "sim/large_pages.hpp"

namespace twin::hardware {

class CollectiveModel;  // collective.hpp

// The fabric beyond the NICs (topology.hpp), when a machine has one: the simulated nodes stand
// for `copies` identical copies (data-parallel replicas simulated once), placed as `placement`
// asks.
struct FabricSpec {
  PlacementOptions placement;
  int copies = 1;
};

struct GpuLinks {
  sim::Fluid::ResourceId nvl_out, nvl_in, nic_out, nic_in, h2d, d2h, cpu, hbm;
};

// Built in one phase: every resource, the fabric's included, exists once the constructor returns.
class Cluster {
 public:
  // `reserved_sms`: SMs held on every GPU for the whole run (nccl.reserved_sms); `fabric`: none
  // for a machine of its nodes alone (no links beyond the NICs).
  Cluster(sim::Engine& engine, sim::Fluid& fluid, const Profile& profile, int gpus,
          int reserved_sms = 0, const std::optional<FabricSpec>& fabric = std::nullopt);
  ~Cluster();

  int gpus() const { return static_cast<int>(gpus_.size()); }
  int gpus_per_node() const { return gpus_per_node_; }
  int node_of(int g) const { return g / gpus_per_node_; }
  Gpu& gpu(int g) { return *gpus_[static_cast<std::size_t>(g)]; }
  const GpuLinks& links(int g) const { return links_[static_cast<std::size_t>(g)]; }
  // The NVLink resource from GPU a to GPU b of the same node.
  sim::Fluid::ResourceId pair(int a, int b) const;

  // The fabric (FabricSpec): copy d's node n sits at fabric node placement[d·nodes + n].
  // Stragglers (placement.shared): every copy's GPUs get their node's and the sample's speed;
  // the simulated GPUs take the speeds of the copy with the slowest GPU (a replica waits at every
  // layer for its slowest GPU, and every replica for the slowest replica at the all-reduce: the
  // order statistic the step sees).
  int slowest_copy() const { return slowest_copy_; }
  // Null when there is no fabric, or when it cannot constrain anything: every node of every
  // copy in one group behind non-blocking leaves (then no route crosses a fabric resource).
  Dragonfly* fabric() const { return fabric_inert_ ? nullptr : fabric_.get(); }
  const Dragonfly* topology() const { return fabric_.get(); }  // for reports
  int copies() const { return copies_; }
  int fabric_node(int copy, int node) const {
    return placement_[static_cast<std::size_t>(copy * (gpus() / gpus_per_node_) + node)];
  }
  const std::vector<int>& placement() const { return placement_; }

  double fluid_capacity(sim::Fluid::ResourceId r) const { return fluid_.capacity(r); }
  // The solver resource that carries link r's flows: r itself, or the resource of the class of
  // alike links r was merged into (collective.hpp merge_alike_links). Ask it for r's saturation.
  sim::Fluid::ResourceId solver_resource(sim::Fluid::ResourceId r) const {
    return r < solver_resource_.size() ? solver_resource_[r] : r;
  }
  void merge_link(sim::Fluid::ResourceId r, sim::Fluid::ResourceId into);
  const Profile& profile() const { return profile_; }
  // The profile's contention model (contention.hpp) with this machine's SM count.
  const ContentionModel& contention() const { return contention_; }
  // GPU g's power state (power.hpp), or null where the profile has no power model.
  PowerState* power(int g) {
    return power_.empty() ? nullptr : &power_[static_cast<std::size_t>(g)];
  }
  // contention().slowdown of a launch of alone_s through this simulation's memo, `held` SMs
  // taken of which `lending` by NCCL CTAs (room beside them: contention.hpp, mechanism 5).
  double contention_slowdown(const KernelShape& k, int held, double alone_s, int lending) {
    if (held <= 0) return 1.0;
    if (const auto s = contention_.split_k(k, alone_s))
      return s->slowdown([&](const KernelPart& p) {
        return contention_slowdown(p.shape, held, p.alone_s, lending);
      });
    const KernelShape own = contention_.own_saturation(k, alone_s);
    return contention_.stretch(k, memo_.time_units(own, held, lending) / memo_.time_units(own, 0),
                               alone_s);
  }
  // What of contention_slowdown does not depend on the SMs held, for one launch: worked out at
  // its first use and kept by the caller, since a running kernel is re-bounded at every change of
  // NCCL's CTAs on its GPU (issue #21).
  struct Prepared {
    bool ready = false, split = false;  // split: a split-K launch (taken the long way)
    std::uint8_t load_intensity = 0;    // its own saturation's (own_saturation)
    double units_alone = 0;             // T(0) of that shape
  };
  // contention_slowdown(k, held, alone_s, lending), the same arithmetic, p kept between calls for
  // the same launch (k and alone_s).
  double contention_slowdown(const KernelShape& k, int held, double alone_s, int lending,
                             Prepared& p) {
    if (held <= 0) return 1.0;
    if (!p.ready) {
      p.ready = true;
      p.split = contention_.split_k(k, alone_s).has_value();
      const KernelShape own = contention_.own_saturation(k, alone_s);
      p.load_intensity = own.load_intensity;
      p.units_alone = p.split ? 0.0 : memo_.time_units(own, 0);
    }
    if (p.split) return contention_slowdown(k, held, alone_s, lending);
    KernelShape own = k;  // own_saturation's result: cta_k applied, its load intensity
    own.cta_k = 0;
    own.load_intensity = p.load_intensity;
    return contention_.stretch(k, memo_.time_units(own, held, lending) / p.units_alone, alone_s);
  }
  // Keeps an activity's state alive as long as the cluster (its callbacks hold a raw pointer).
  template <class T>
  T* keep(std::shared_ptr<T> p) {
    kept_.push_back(p);
    return p.get();
  }
  // Makes a trivially destructible T that lives as long as the cluster, from a monotonic arena:
  // what a task's on_ready needs without one heap allocation per task.
  template <class T, class... A>
  T* make(A&&... args) {
    static_assert(std::is_trivially_destructible_v<T>);
    return new (arena_.allocate(sizeof(T), alignof(T))) T{std::forward<A>(args)...};
  }
  // Raw storage from the same arena (arrays of trivially destructible values).
  void* allocate(std::size_t bytes, std::size_t align) { return arena_.allocate(bytes, align); }
  // Storage for state that lives only while its activity runs (a grid kernel's): taken back
  // when it ends and handed out again, so that a step's ~10⁶ kernels touch memory for the few
  // that run at once. Blocks of one size only (`bytes` must be the same on every call).
  void* take_transient(std::size_t bytes, std::size_t align) {
    if (spare_.empty()) return arena_.allocate(bytes, align);
    void* p = spare_.back();
    spare_.pop_back();
    return p;
  }
  void give_back_transient(void* p) { spare_.push_back(p); }
  // The machine's collectives: plans, link merging (collective.hpp).
  CollectiveModel& collectives() { return *collectives_; }
  sim::Engine& engine() { return engine_; }
  sim::Fluid& fluid() { return fluid_; }

 private:
  sim::Engine& engine_;
  sim::Fluid& fluid_;
  const Profile& profile_;
  int gpus_per_node_;
  ContentionModel contention_;
  ContentionMemo memo_{contention_};
  std::vector<std::unique_ptr<Gpu>> gpus_;
  std::vector<PowerState> power_;  // per GPU; empty without a power model
  std::vector<GpuLinks> links_;
  std::vector<sim::Fluid::ResourceId> pairs_;  // [gpu][local peer]
  std::unique_ptr<Dragonfly> fabric_;
  std::vector<int> placement_;
  void attach_fabric(const FabricSpec& f);
  void apply_stragglers(const SharedMachine& m, std::uint64_t seed);
  // Other jobs' traffic drawn again every `burst` (shared.burst_s), from burst `next` on.
  void redraw_every(sim::Time burst, std::int64_t next);
  int copies_ = 1;
  int slowest_copy_ = 0;
  bool fabric_inert_ = false;
  std::vector<std::shared_ptr<void>> kept_;
  std::pmr::monotonic_buffer_resource arena_{&sim::large_pages()};
  std::unique_ptr<CollectiveModel> collectives_;
  std::vector<sim::Fluid::ResourceId> solver_resource_;  // by link; shorter: unmerged
  std::vector<void*> spare_;                             // transient blocks handed back
};

}  // namespace twin::hardware
