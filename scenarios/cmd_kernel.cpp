// `twin kernel`: one kernel alone and while k SMs are held, as the twin times it — the kernel
// cost model (hardware/kernel_cost.hpp) for its time alone, the contention model
// (hardware/contention.hpp) for the slowdown, and the engine running it beside an SM holder.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <ostream>

#include "hardware/cluster.hpp"
#include "hardware/kernel_cost.hpp"
#include "hardware/ops.hpp"
#include "model/kernel_shapes.hpp"
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

// The kernel's work: time alone (cost model) and contention shape (model/kernel_shapes.hpp).
KernelWork kernel_work(const KernelArgs& k, const hardware::KernelCost& cost) {
  const int sms = cost.sm_count();
  if (k.kernel == "gemm" || k.kernel == "gemm_fp8") {
    const char* mnk = "M,N,K";
    const double m = dim(k, 0, mnk), n = dim(k, 1, mnk), kk = dim(k, 2, mnk);
    const bool fp8 = k.kernel == "gemm_fp8";
    auto shape = model::gemm_shape(sms, m, n);
    if (fp8) shape = {Family::gemm_fp8, hardware::Schedule::persistent_dynamic, 1, static_cast<float>(sms)};
    return {cost.gemm_s(m, n, kk, fp8), 0, KernelClass::grid, shape};
  }
  if (k.kernel == "grouped_static" || k.kernel == "grouped_dynamic") {
    const char* what = "ROWS_PER_EXPERT,N,K,EXPERTS";
    const double rows = dim(k, 0, what), n = dim(k, 1, what), kk = dim(k, 2, what), e = dim(k, 3, what);
    const bool dyn = k.kernel == "grouped_dynamic";
    return {e * (cost.gemm_s(rows, n, kk) - cost.overhead_s()) + cost.overhead_s(), 0,
            dyn ? KernelClass::persistent_dynamic : KernelClass::persistent_static,
            model::grouped_shape(sms, dyn)};
  }
  if (k.kernel == "attention_fwd" || k.kernel == "attention_bwd")
    return model::grid_work(cost.attention_s(dim(k, 0, "FLOPS"), k.kernel == "attention_bwd"),
                            model::attention_shape(sms));
  const Family f = hardware::family_of(k.kernel);
  if (f == Family::count || f < Family::ew_add)
    throw InputError("--kernel", "", fmt::format("unknown kernel \"{}\": gemm, gemm_fp8, grouped_static, "
                                                  "grouped_dynamic, attention_fwd, attention_bwd or an "
                                                  "elementwise family (ew_add, ew_norm, …)", k.kernel));
  const double bytes = dim(k, 0, "BYTES");
  const bool grid_stride = f == Family::ew_fp8_dequant || f == Family::ew_sum_fp32;
  return model::grid_work(cost.elementwise_s(bytes), grid_stride ? model::grid_stride_shape(sms, f)
                                                                 : model::elementwise_shape(f, bytes));
}

// The engine's time for the kernel with `held` SMs taken by an NCCL-like holder throughout.
double engine_s(const Scenario& s, const KernelWork& w, int held) {
  sim::Engine e;
  sim::Fluid f(e);
  sim::TaskGraph g(e);
  hardware::Cluster c(e, f, s.hw, static_cast<int>(s.hw.node.gpus), s.nccl);
  if (held > 0) c.gpu(0).request(held, hardware::Gpu::Holder::nccl, [](int) {});
  auto& t = g.add("kernel");
  hardware::run_kernel(t, c, 0, w);
  g.start();
  e.run();
  return t.end_time().to_s();
}

}  // namespace

int cmd_kernel(const CommonArgs& args, const KernelArgs& k, std::ostream& out) {
  const auto loaded = load_scenario(args.scenario, args.load_options());
  const auto& s = loaded.scenario;
  const hardware::KernelCost cost(s.hw);
  const KernelWork w = kernel_work(k, cost);
  const int sms = static_cast<int>(s.hw.gpu.sm_count) - static_cast<int>(s.nccl.reserved_sms);
  Json rows = Json::array();
  const double alone = engine_s(s, w, 0);
  for (const int held : k.held_sms) {
    if (held < 0 || held >= sms)
      throw InputError("--held-sms", "", fmt::format("{} is out of range [0, {}]", held, sms - 1));
    const double t = engine_s(s, w, held);
    rows.push_back({{"held_sms", held}, {"time_ms", t * 1e3}, {"slowdown", t / alone}});
  }
  const Json doc{{"kernel", k.kernel}, {"shape", k.shape}, {"profile", s.hw.name},
                 {"family", std::string(hardware::family_name(w.shape.family))},
                 {"alone_ms", alone * 1e3}, {"points", rows}};
  if (args.json) {
    out << doc.dump(2) << "\n";
    return 0;
  }
  fmt::print(out, "{} [{}] on {}: {:.4f} ms alone (family {})\n", k.kernel, fmt::join(k.shape, ","),
             s.hw.name, alone * 1e3, doc["family"].get<std::string>());
  fmt::print(out, "  {:>9} {:>12} {:>9}\n", "SMs held", "time ms", "slowdown");
  for (const auto& r : rows)
    fmt::print(out, "  {:>9} {:>12.4f} {:>9.3f}\n", r["held_sms"].get<int>(), r["time_ms"].get<double>(),
               r["slowdown"].get<double>());
  return 0;
}

}  // namespace twin::scenarios
