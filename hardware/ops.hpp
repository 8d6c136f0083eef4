// What a task does on the hardware: kernels of three classes, copies, CPU work, fixed delays.
// Each `run_*` sets the task's on_ready; the task finishes when the work is done.
//
// Kernel classes (JOB.md §6.5): a kernel's work is its time alone on the whole GPU, T; how it
// slows with fewer SMs is its shape's contention model (contention.hpp, measured per family).
//  grid               blocks the hardware dispatches (cuBLAS, attention, elementwise): a fluid
//                     flow of T·S SM·seconds bounded at S·speed(free SMs) — re-bounded whenever
//                     the GPU's free SMs change — and sharing the SMs nobody holds with other
//                     grid kernels;
//  persistent_static  one block per SM, each with a fixed tile list: blocks that find no free SM
//                     start when one frees, then run their whole list, at the per-SM rate of the
//                     blocks then running (power-capped clocks); the kernel ends when its last
//                     block ends — k held SMs cost a whole extra round;
//  persistent_dynamic blocks take tiles from a shared counter: the kernel's work drains at the
//                     speed of the SMs it holds; held SMs only slow it.
// Grid and dynamic kernels also draw HBM bandwidth (bytes / T when alone), shared with every
// other user of the GPU's HBM.
#pragma once

#include <span>

#include "hardware/cluster.hpp"
#include "hardware/contention.hpp"
#include "sim/task.hpp"

namespace twin::hardware {

enum class KernelClass { grid, persistent_static, persistent_dynamic };

struct KernelWork {
  double alone_s = 0;    // time alone on the whole, idle GPU
  double hbm_bytes = 0;  // bytes it moves through HBM
  KernelClass cls = KernelClass::grid;
  KernelShape shape{};  // how it slows while SMs are held (contention.hpp)
  Gpu::Priority priority = Gpu::Priority::normal;  // its stream's (gpu.hpp: who gets an SM)
};

enum class CopyDir { h2d, d2h, d2d };

void run_kernel(sim::Task& t, Cluster& c, int gpu, KernelWork w);
// Grid kernels run back to back as one task: with s free SMs it runs at Σ t_i / Σ
// t_i·slowdown_i(s). The parts are read in place: they must outlive the simulation.
void run_fused(sim::Task& t, Cluster& c, int gpu, std::span<const KernelPart> parts,
               Gpu::Priority priority = Gpu::Priority::normal);
void run_copy(sim::Task& t, Cluster& c, int gpu, CopyDir dir, double bytes);
// `core_s` core·seconds of work using at most `max_cores` of the rank's cores at once.
void run_cpu(sim::Task& t, Cluster& c, int gpu, double core_s, double max_cores);
void run_delay(sim::Task& t, Cluster& c, sim::Time d);

}  // namespace twin::hardware
