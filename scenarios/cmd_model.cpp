// `twin model`: parameters, FLOPs per step and per-rank memory of the states (model/accounting).
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <unistd.h>

#include <ostream>

#include "model/accounting.hpp"
#include "model/host_memory.hpp"
#include "reports/output.hpp"
#include "scenarios/commands.hpp"

namespace twin::scenarios {

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
}

LoadOptions CommonArgs::load_options() const {
  return {data_dir.empty() ? default_data_dir() : std::filesystem::path(data_dir), sets};
}

RunOptions CommonArgs::run_options() const {
  RunOptions o;
  o.event_limit = max_events;
  o.memory_limit_GiB = max_memory_GiB;
  if (o.memory_limit_GiB <= 0) {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0)
      o.memory_limit_GiB =
          0.75 * static_cast<double>(pages) * static_cast<double>(page) / (1ull << 30);
  }
  return o;
}

void CommonArgs::check_output(const std::string& path, const char* option) const {
  if (path.empty()) return;
  if (const auto why = reports::output_problem(path, {scenario}); !why.empty())
    throw InputError(option, "", path + ": " + why);
}

Json accounting_json(const Scenario& s) {
  const auto& job = s.job;
  const auto p = model::count_params(job.model);
  const auto rows = model::step_rows(job);
  const auto f = model::step_flops(job, rows);
  const auto mem = model::rank_memory(job);
  Json j;
  j["params_total"] = p.total();
  j["params_active"] = model::active_params(job.model);
  j["params_by_component"] = {{"attention", p.attention}, {"router", p.router},
                              {"experts", p.experts},     {"norms", p.norms},
                              {"embedding", p.embedding}, {"head", p.head}};
  if (p.ffn > 0) j["params_by_component"]["ffn"] = p.ffn;  // a dense SwiGLU (Llama)
  j["tokens_per_step"] = job.tokens_per_step();
  Json cats = Json::object();
  for (const auto& [name, ph] : f.by_category)
    cats[name] = {{"forward", ph.forward}, {"backward", ph.backward}, {"recompute", ph.recompute}};
  j["flops_per_step"] = {{"total", f.total()}, {"by_category", cats}};
  // GiB values only under memory_per_rank_GiB; counts and where the states live beside it.
  j["states_per_rank"] = {{"param_shard_elems", mem.param_shard_elems},
                          {"on_host", mem.states_on_host},
                          {"offloaded_layers", model::offloaded_layers(job)}};
  j["memory_per_rank_GiB"] = {
      {"master_params", mem.master_params / kGiB},
      {"grads", mem.grads / kGiB},
      {"optimizer_states", mem.optimizer_states / kGiB},
      {"activations_hbm", mem.activations_hbm / kGiB},
      {"activations_host", mem.activations_host / kGiB},
      // The host total of `twin run` and `twin memory` (model/host_memory.hpp: also the process
      // baseline, pinned rounding and the offload arena as allocated), not only the states here.
      {"host_total", model::host_memory(job, s.hw).total_bytes / kGiB},
      {"host_capacity", s.hw.host.memory_per_gpu_GiB},
      {"hbm_capacity", s.hw.gpu.hbm_usable_GiB}};
  return j;
}

namespace {

void print_table(const Scenario& s, const Json& a, std::ostream& out) {
  const auto& par = s.job.parallel;
  fmt::print(out, "scenario {} — model {} on {} ({} GPUs, ep {}, dp {}{})\n\n", s.name,
             s.job.model.name, s.hw.name, par.total_gpus(), par.ep, par.dp,
             par.tp > 1 ? fmt::format(", tp {}", par.tp) : "");
  fmt::print(out, "{:<22}{:>18}\n", "parameters", "count");
  for (const auto& [k, v] : a["params_by_component"].items())
    fmt::print(out, "  {:<20}{:>18.4g}\n", k, v.get<double>());
  fmt::print(out, "  {:<20}{:>18.4g}\n  {:<20}{:>18.4g}\n\n", "total",
             a["params_total"].get<double>(), "active per token", a["params_active"].get<double>());
  fmt::print(out, "{:<22}{:>12}{:>12}{:>12}   (PFLOP per step, {} tokens)\n", "FLOPs", "forward",
             "backward", "recompute", a["tokens_per_step"].get<std::int64_t>());
  for (const auto& [k, v] : a["flops_per_step"]["by_category"].items())
    fmt::print(out, "  {:<20}{:>12.1f}{:>12.1f}{:>12.1f}\n", k, v["forward"].get<double>() / 1e15,
               v["backward"].get<double>() / 1e15, v["recompute"].get<double>() / 1e15);
  fmt::print(out, "  {:<20}{:>12.1f}\n\n", "total",
             a["flops_per_step"]["total"].get<double>() / 1e15);
  const auto& m = a["memory_per_rank_GiB"];
  const auto& states = a["states_per_rank"];
  const char* where = states["on_host"].get<bool>() ? "host" : "HBM";
  fmt::print(out, "memory per rank (GiB)\n");
  fmt::print(out, "  {:<36}{:>8.2f}  {}\n", "fp32 master parameters",
             m["master_params"].get<double>(), where);
  fmt::print(out, "  {:<36}{:>8.2f}  {}\n", "fp32 gradients", m["grads"].get<double>(), where);
  fmt::print(out, "  {:<36}{:>8.2f}  {}\n", "optimizer states", m["optimizer_states"].get<double>(),
             where);
  fmt::print(out, "  {:<36}{:>8.2f}  HBM\n", "checkpointed activations kept",
             m["activations_hbm"].get<double>());
  fmt::print(out, "  {:<36}{:>8.2f}  host ({} layers offloaded)\n",
             "checkpointed activations offloaded", m["activations_host"].get<double>(),
             states["offloaded_layers"].get<std::int64_t>());
  fmt::print(
      out, "  {:<36}{:>8.2f}  of {:.1f} usable (with the process, pinned rounding: twin memory)\n",
      "host total", m["host_total"].get<double>(), m["host_capacity"].get<double>());
}

}  // namespace

int cmd_model(const CommonArgs& args, std::ostream& out) {
  const auto loaded = load_scenario(args.scenario, args.load_options());
  const auto a = accounting_json(loaded.scenario);
  if (args.json) {
    Json j = a;
    j["scenario"] = loaded.resolved;
    out << j.dump(2) << "\n";
  } else {
    print_table(loaded.scenario, a, out);
  }
  return 0;
}

int cmd_resolve(const CommonArgs& args, std::ostream& out) {
  out << load_scenario(args.scenario, args.load_options()).resolved.dump(2) << "\n";
  return 0;
}

}  // namespace twin::scenarios
