// `twin kernel`: one kernel alone and while k SMs are held, as the twin times it — the kernel
// cost model (hardware/kernel_cost.hpp) for its time alone, the contention model
// (hardware/contention.hpp) for the slowdown, and the engine running it beside an SM holder.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <cmath>
#include <optional>
#include <ostream>

#include "hardware/cluster.hpp"
#include "hardware/collective.hpp"
#include "hardware/kernel_cost.hpp"
#include "hardware/kernel_shapes.hpp"
#include "hardware/nvjet_name.hpp"
#include "hardware/ops.hpp"
#include "scenarios/commands.hpp"
#include "sim/task.hpp"

namespace twin::scenarios {

namespace {

using hardware::Family;
using hardware::KernelClass;
using hardware::KernelWork;

double dim(const KernelArgs& k, std::size_t i, const char* what) {
  if (k.shape.size() <= i) throw InputError("--shape", "", fmt::format("expected {}", what));
  return k.shape[i];
}

// A bf16 GEMM's cuBLAS launch: the one named (--nvjet, --grid), else the twin's choice.
hardware::GemmLaunch gemm_launch(const KernelArgs& k, int sms) {
  const char* mnk = "M,N,K";
  const hardware::GemmDims d{dim(k, 0, mnk), dim(k, 1, mnk), dim(k, 2, mnk)};
  if (k.nvjet.empty()) return hardware::gemm_launch(sms, d.m, d.n, d.k);
  try {
    return hardware::nvjet_named_launch(k.nvjet, d, 1, k.grid, sms);
  } catch (const std::invalid_argument& e) {
    throw InputError("--nvjet", "", e.what());
  }
}

// The kernel's work: time alone (cost model) and contention shape (hardware/kernel_shapes.hpp).
KernelWork kernel_work(const KernelArgs& k, const hardware::KernelCost& cost, bool equal_rows) {
  const int sms = cost.sm_count();
  if ((!k.nvjet.empty() || k.grid > 0) && k.kernel != "gemm")
    throw InputError(k.nvjet.empty() ? "--grid" : "--nvjet", "",
                     "expected only with --kernel gemm");
  if (k.grid > 0 && k.nvjet.empty()) throw InputError("--grid", "", "expected only with --nvjet");
  if (k.kernel == "gemm" || k.kernel == "gemm_fp8") {
    const char* mnk = "M,N,K";
    const double m = dim(k, 0, mnk), n = dim(k, 1, mnk), kk = dim(k, 2, mnk);
    const bool fp8 = k.kernel == "gemm_fp8";
    const auto shape =
        fp8 ? hardware::gemm_fp8_shape(sms, m, n) : hardware::gemm_shape(gemm_launch(k, sms));
    return {cost.gemm_s(m, n, kk, fp8), 0, KernelClass::grid, shape};
  }
  if (k.kernel == "grouped_static" || k.kernel == "grouped_dynamic") {
    const char* what = "ROWS_PER_EXPERT,N,K,EXPERTS";
    const double rows = dim(k, 0, what), n = dim(k, 1, what), kk = dim(k, 2, what),
                 e = dim(k, 3, what);
    const bool dyn = k.kernel == "grouped_dynamic";
    return {cost.grouped_gemm_s(rows, n, kk, e, equal_rows), 0,
            dyn ? KernelClass::persistent_dynamic : KernelClass::persistent_static,
            hardware::grouped_shape(sms, dyn)};
  }
  if (k.kernel == "attention_fwd" || k.kernel == "attention_bwd")
    return hardware::grid_work(
        cost.attention_s(sim::Flops{dim(k, 0, "FLOPS")}, k.kernel == "attention_bwd"),
        hardware::attention_shape(sms, k.kernel == "attention_bwd"));
  const Family f = hardware::family_of(k.kernel);
  if (f == Family::count || f < Family::ew_add)
    throw InputError("--kernel", "",
                     fmt::format("unknown kernel \"{}\": gemm, gemm_fp8, grouped_static, "
                                 "grouped_dynamic, attention_fwd, attention_bwd or an "
                                 "elementwise family (ew_add, ew_norm, …)",
                                 k.kernel));
  return hardware::elementwise_work(cost, f, dim(k, 0, "BYTES"));
}

// A collective over the GPUs of the scenario's first node, NCCL's CTAs capped as the scenario
// says: "KIND,BYTES,CTAS" (KIND all_gather | reduce_scatter | all_reduce | all_to_all).
hardware::CollectiveSpec collective_spec(const std::string& text, const Scenario& s) {
  const auto fail = [&] {
    return InputError("--beside-collective", "",
                      fmt::format("\"{}\": expected KIND,BYTES,CTAS with KIND "
                                  "all_gather, reduce_scatter, all_reduce or all_to_all",
                                  text));
  };
  const auto a = text.find(','), b = text.rfind(',');
  if (a == std::string::npos || a == b) throw fail();
  hardware::CollectiveSpec spec;
  try {
    spec.kind = collective_kind(text.substr(0, a), "--beside-collective");
  } catch (const InputError&) {
    throw fail();
  }
  try {
    spec.bytes = std::stod(text.substr(a + 1, b - a - 1));
    spec.ctas = std::stoi(text.substr(b + 1));  // NCCL's own count; capped below
  } catch (const std::exception&) {
    throw fail();
  }
  if (!(spec.bytes > 0) || spec.ctas < 1 || spec.ctas > 64) throw fail();
  spec.ctas = hardware::channels(spec.kind, spec.ctas, s.nccl, static_cast<int>(s.hw.gpu.sm_count));
  for (int g = 0; g < static_cast<int>(s.hw.node.gpus); ++g) spec.ranks.push_back(g);
  return spec;
}

// How cuBLAS launches a bf16 GEMM and where the launch saturates (contention.hpp, mechanism 3):
// its load intensity's a_sat, and, with one tile per CTA, its lone CTA's, which it then takes;
// split-K: the slices' (the reduction after them is its own kernel, split_k()).
Json gemm_launch_json(const KernelArgs& k, const hardware::KernelCost& cost, const KernelWork& w,
                      const hardware::ContentionModel& m) {
  const auto l = gemm_launch(k, cost.sm_count());
  const auto split = m.split_k(w.shape, w.alone_s);
  const auto own = split ? m.own_saturation(split->slices.shape, split->slices.alone_s)
                         : m.own_saturation(w.shape, w.alone_s);
  return {{"nvjet", k.nvjet.empty() ? Json(nullptr) : Json(k.nvjet)},
          {"tile", {l.tile_m, l.tile_n}},
          {"cluster", l.cluster},
          {"ctas", l.ctas},
          {"tiles", l.tiles},
          {"cluster_shape", l.cluster_shape()},
          {"split_k", l.split_k},
          {"split_k_reduce_us", split ? split->reduce.alone_s * 1e6 : 0.0},
          {"split_k_reduce_blocks", split ? split->reduce.shape.blocks : 0.0f},
          {"load_intensity", hardware::load_intensity(l)},
          {"load_intensity_sat_sms", m.sat_sms(w.shape)},
          {"lone_cta_us", m.lone_cta_s(w.shape) * 1e6},
          {"lone_cta_measured", m.lone_cta.measured(l.tile_m, l.tile_n, l.cluster_shape()[0],
                                                    l.cluster_shape()[1]) >= 0},
          {"sat_sms", m.sat_sms(own)}};
}

struct Times {
  double kernel_s, collective_s;
};

// The engine's times for the kernel on GPU 0 with `held` SMs taken by an NCCL-like holder
// throughout, or beside a collective over the node that starts with it.
Times engine_s(const Scenario& s, const KernelWork& w, int held,
               const hardware::CollectiveSpec* beside) {
  sim::Engine e;
  sim::Fluid f(e);
  sim::TaskGraph g(e);
  const int gpus = static_cast<int>(s.hw.node.gpus);
  hardware::Cluster c(e, f, s.hw, gpus, static_cast<int>(s.nccl.reserved_sms));
  if (held > 0) c.gpu(0).request(held, hardware::Gpu::Holder::nccl, [](int) {});
  std::vector<sim::Task*> coll;
  if (beside) {
    for (int r = 0; r < gpus; ++r) coll.push_back(&g.add("collective"));
    hardware::run_collective(coll, c, *beside);
  }
  auto& t = g.add("kernel");
  hardware::run_kernel(t, c, 0, w);
  g.start();
  e.run();
  // A kernel whose clusters find no room beside the held SMs never starts (contention.hpp).
  const double kernel_s = t.state() == sim::Task::State::done ? t.end_time().to_s() : INFINITY;
  return {kernel_s, coll.empty() ? 0.0 : coll[0]->end_time().to_s()};
}

// The kernel's times alone, at each held count and beside a collective, as `--json` writes them.
Json kernel_json(const Scenario& s, const KernelArgs& k) {
  const hardware::KernelCost cost(s.hw);
  KernelWork w = kernel_work(k, cost, s.job.training.expert_rows == model::ExpertRows::equal);
  if (k.alone_us > 0) w.alone_s = k.alone_us * 1e-6;  // a measured time alone (the fit's input)
  const int sms = static_cast<int>(s.hw.gpu.sm_count) - static_cast<int>(s.nccl.reserved_sms);
  std::optional<hardware::CollectiveSpec> beside;
  if (!k.beside_collective.empty()) beside = collective_spec(k.beside_collective, s);
  const double alone = engine_s(s, w, 0, nullptr).kernel_s;
  Json rows = Json::array();
  for (const int held : k.held_sms) {
    if (held < 0 || held >= sms)
      throw InputError("--held-sms", "", fmt::format("{} is out of range [0, {}]", held, sms - 1));
    const double t = engine_s(s, w, held, nullptr).kernel_s;
    if (std::isinf(t))
      rows.push_back(
          {{"held_sms", held}, {"time_ms", nullptr}, {"slowdown", nullptr}, {"blocked", true}});
    else
      rows.push_back({{"held_sms", held}, {"time_ms", t * 1e3}, {"slowdown", t / alone}});
  }
  Json doc{
      {"kernel", k.kernel},      {"shape", k.shape},
      {"profile", s.hw.name},    {"family", std::string(hardware::family_name(w.shape.family))},
      {"alone_ms", alone * 1e3}, {"points", rows}};
  if (k.kernel == "gemm") doc["launch"] = gemm_launch_json(k, cost, w, s.hw.contention);
  if (beside) {
    const auto both = engine_s(s, w, 0, &*beside);
    const auto coll = engine_s(s, {}, 0, &*beside);
    doc["beside_collective"] = {{"collective", k.beside_collective},
                                {"kernel_ms", both.kernel_s * 1e3},
                                {"slowdown", both.kernel_s / alone},
                                {"collective_ms", both.collective_s * 1e3},
                                {"collective_alone_ms", coll.collective_s * 1e3}};
  }
  return doc;
}

// cuBLAS's launch as the twin takes it: tiles, clusters, split-K, the lone CTA, saturation.
void print_launch(std::ostream& out, const Json& l, bool named) {
  fmt::print(
      out,
      "  cuBLAS launch{}: {}×{} tiles in clusters of {} ({}x{}), {} CTAs for {} tiles (split-K "
      "{}{}); a lone CTA {:.1f} µs ({}); saturates at {:.0f} SMs (its load intensity's: "
      "{:.0f})\n",
      named ? " (as named)" : "", l["tile"][0].get<int>(), l["tile"][1].get<int>(),
      l["cluster"].get<int>(), l["cluster_shape"][0].get<int>(), l["cluster_shape"][1].get<int>(),
      l["ctas"].get<double>(), l["tiles"].get<double>(), l["split_k"].get<int>(),
      l["split_k_reduce_us"].get<double>() > 0
          ? fmt::format(", then a reduction of {:.1f} µs on {:.0f} blocks",
                        l["split_k_reduce_us"].get<double>(),
                        l["split_k_reduce_blocks"].get<double>())
          : "",
      l["lone_cta_us"].get<double>(),
      l["lone_cta_measured"].get<bool>() ? "this kernel's, measured" : "the form: not measured",
      l["sat_sms"].get<double>(), l["load_intensity_sat_sms"].get<double>());
}

// kernel_json's document as text.
void print_kernel(std::ostream& out, const Json& doc, const KernelArgs& k, const Scenario& s) {
  fmt::print(out, "{} [{}] on {}: {:.4f} ms alone (family {})\n", k.kernel, fmt::join(k.shape, ","),
             s.hw.name, doc["alone_ms"].get<double>(), doc["family"].get<std::string>());
  if (doc.contains("launch")) print_launch(out, doc["launch"], !k.nvjet.empty());
  fmt::print(out, "  {:>9} {:>12} {:>9}\n", "SMs held", "time ms", "slowdown");
  for (const auto& r : doc["points"])
    if (r.contains("blocked"))
      fmt::print(out, "  {:>9} {:>12} {:>9}  (no cluster can start beside the held SMs)\n",
                 r["held_sms"].get<int>(), "blocked", "-");
    else
      fmt::print(out, "  {:>9} {:>12.4f} {:>9.3f}\n", r["held_sms"].get<int>(),
                 r["time_ms"].get<double>(), r["slowdown"].get<double>());
  if (doc.contains("beside_collective")) {
    const auto& b = doc["beside_collective"];
    fmt::print(out,
               "  beside {} over the node's {} GPUs: kernel {:.4f} ms (×{:.3f}), collective "
               "{:.4f} ms ({:.4f} alone)\n",
               k.beside_collective, s.hw.node.gpus, b["kernel_ms"].get<double>(),
               b["slowdown"].get<double>(), b["collective_ms"].get<double>(),
               b["collective_alone_ms"].get<double>());
  }
}

}  // namespace

int cmd_kernel(const CommonArgs& args, const KernelArgs& k, std::ostream& out) {
  auto options = args.load_options();
  if (!k.profile.empty())  // first: the --set keys apply on top of it
    options.sets.insert(options.sets.begin(), "hardware.profile=" + k.profile);
  const auto loaded = load_scenario(args.scenario, options);
  const Json doc = kernel_json(loaded.scenario, k);
  if (args.json)
    out << doc.dump(2) << "\n";
  else
    print_kernel(out, doc, k, loaded.scenario);
  return 0;
}

}  // namespace twin::scenarios
