// Real runs as the twin sees them: the GPU work of one step of a PyTorch profiler trace (the
// Chrome JSON that torch.profiler exports, as .json or .json.gz) — kernels, copies and memsets
// with their streams, times and grids — each put into one of the twin's categories by its name
// (issue #20). What a trace cannot say is left out rather than guessed: a GEMM's role (dense or
// expert) is read from the library that ran it (grouped GEMMs are the experts'), and the
// dependencies between streams are not read at all.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace twin::scenarios {

struct TraceActivity {
  std::string name;        // as the trace names it
  std::string category;    // the twin's category name, or copy_d2d, memset, other
  std::string collective;  // NCCL kernels: all_gather, reduce_scatter, all_reduce, all_to_all,
                           // broadcast; the micro-step's SM holders: stand_in; else ""
  std::int64_t stream = 0;
  double start_us = 0, dur_us = 0;  // start relative to the step's first GPU activity
  int ctas = 0;                     // a kernel's grid (blocks); a collective holds one SM each
  // When the host's CUDA call that launched it began, on the same clock (NaN: not in the trace).
  double launch_us = std::numeric_limits<double>::quiet_NaN();
  double bytes = 0;  // a memcpy's or memset's bytes (the trace's args.bytes)
};

struct KinetoStep {
  std::string step;  // the ProfilerStep#N read, or "" (the whole trace: no step markers)
  std::vector<TraceActivity> activities;  // by start time
};

// One launch on a stream, the same for a real trace and a twin plan (comparisons and charts).
struct Span {
  std::string stream, category, collective, name;  // collective as in TraceActivity
  double start_s = 0, dur_s = 0;                   // from the step's first activity
  double launches = 1;                             // kernels it stands for (a plan's repeat)
  int ctas = 0;                                    // SMs a collective holds
};
struct KinetoStep;
// A trace's activities as spans ("stream N" after the trace's stream id).
std::vector<Span> spans_of(const KinetoStep& step);
// A twin launch plan's launches (scenarios/plan.hpp) as spans: a task's launches one after
// another from its start (the plan times tasks, not launches); collectives keep their category
// as `name` and their kind in `collective`.
std::vector<Span> spans_of_plan(const nlohmann::ordered_json& plan);

// The twin's category of a GPU activity of the trace (its name and the trace's `cat`), and for
// collectives their kind in `collective`. Rules, in order: memcpy by direction; memset; NCCL
// kernels (ncclDevKernel/ncclKernel) and kernels/sm_hold.cu's holders → a collective; CUTLASS
// grouped GEMMs (GroupProblemShape, grouped_gemm) → expert_gemm; flash/fmha/sdpa/flex attention →
// attention; cuBLAS/CUTLASS GEMMs (nvjet, gemm, xmma, cutlass) → other_gemm; multi-tensor
// optimizer kernels (multi_tensor_apply, adam) → optimizer_gpu; anything else → elementwise.
std::string activity_category(std::string_view cat, std::string_view name, std::string& collective);

// Reads the trace's GPU activities of one profiled step: those whose CUDA launch (matched by
// correlation id) falls inside the CPU annotation `step` (e.g. "ProfilerStep#2"; "" = the last
// one in the trace; a trace without step markers is read whole). Throws InputError naming the
// file and what was expected on bad input.
KinetoStep read_kineto(const std::string& file, const std::string& step = "");

}  // namespace twin::scenarios
