// A test machine for the hardware tests: a JUPITER-like node with round numbers, an engine and
// its solver around a cluster, and an NCCL-like SM holder.
#pragma once

#include "hardware/cluster.hpp"
#include "hardware/profile.hpp"
#include "sim/task.hpp"

namespace twin::hardware::test {

using sim::Time;

inline Profile test_profile() {
  Profile p;
  p.name = "test";
  p.gpu = {132, 228, 95, 3000, 989, 1979, 0};
  p.host = {72, 108, 450, 5, 50, 1};
  p.node = {4, 400, 300, 150, 450, 25};
  p.network = {1000, 100, 10};
  p.nccl = {40, 5, 10, 2, 5, 2.5};
  return p;
}

struct Rig {
  sim::Engine engine;
  sim::Fluid fluid{engine};
  sim::TaskGraph graph{engine};
  Profile profile = test_profile();
  Cluster cluster;
  explicit Rig(int gpus, int reserved_sms = 0,
               const std::optional<FabricSpec>& fabric = std::nullopt)
      : cluster(engine, fluid, profile, gpus, reserved_sms, fabric) {}
  // A machine of another profile (its fabric's network, say).
  Rig(int gpus, const Profile& p, const std::optional<FabricSpec>& fabric = std::nullopt)
      : profile(p), cluster(engine, fluid, profile, gpus, 0, fabric) {}
};

// Holds k SMs of a GPU from 0 until `until` (an NCCL kernel stand-in).
inline void hold_sms(Rig& r, int gpu, int k, Time until) {
  r.cluster.gpu(gpu).request(k, Gpu::Holder::nccl, [](int) {});
  r.engine.at(until, [&r, gpu, k] { r.cluster.gpu(gpu).release(k, Gpu::Holder::nccl); });
}

}  // namespace twin::hardware::test
