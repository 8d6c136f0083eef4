// twin-fit-contention: fits the SM-contention model (hardware/contention.hpp) to the curves that
// calibrate/contention_bench.py measured, writes the fitted `contention` section of a hardware
// profile (every value with its source) and the residuals per family. No GPU needed.
//
//   build/twin-fit-contention reports/calibration/contention/h200-2026-11-30-contention-a.json
//       --out reports/calibration/contention/fit.json
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <tuple>

#include "calibrate/contention_fit.hpp"
#include "calibrate/contention_plot.hpp"
#include "calibrate/split_k_reduce.hpp"

using namespace twin;
using Json = nlohmann::ordered_json;

namespace {

// Fitted values on their search grids (0.01 for gains, 0.1 SMs), without binary noise.
double tidy(double v) {
  return std::round(v * 100) / 100;
}

std::string file_names(const std::vector<std::string>& files) {
  std::string s;
  for (const auto& f : files) s += (s.empty() ? "" : ", ") + f.substr(f.find_last_of('/') + 1);
  return s;
}

// A lone CTA's keys (mechanism 3), fitted on `lone_data` without the shapes of `held_out`.
void lone_cta_keys(Json& s, const hardware::ContentionModel::LoneCta& l,
                   const std::string& lone_data, const std::string& held_out) {
  const std::string how =
      "on rounds of lone CTAs of nvjet's small-row tiles (124 SMs held for pairs, 112 for "
      "clusters of 4), least squares per kernel (tile, cluster) over its k "
      "(calibrate::lone_cta_tiles, " +
      lone_data + (held_out.empty() ? "" : "; the shapes of " + held_out + " left out") + ")";
  const std::string src =
      "[meas] the form t_s + k·max(bytes/r, MACs/F) for kernels not measured: "
      "the medians over the measured kernels' lines (F: those at 3.5 TMAC/s or "
      "more; r: the others) " +
      how;
  s["lone_cta_setup_us"] = {{"value", tidy(l.setup_us)}, {"source", src}};
  s["lone_cta_stream_GBps"] = {{"value", std::round(l.stream_GBps)}, {"source", src}};
  s["lone_cta_TMACps"] = {{"value", tidy(l.TMACps)}, {"source", src}};
  const std::string tile_src = "[meas] each kernel's line t = setup_us + k·per_k_ns " + how;
  auto& t = s["lone_cta_tiles"];
  const auto ints = [](const std::vector<double>& v) {
    return std::vector<int>(v.begin(), v.end());
  };
  t["tile_m"] = {{"value", ints(l.tile_m)}, {"source", tile_src}};
  t["tile_n"] = {{"value", ints(l.tile_n)}, {"source", tile_src}};
  t["cluster_m"] = {{"value", ints(l.tile_cluster_m)}, {"source", tile_src}};
  t["cluster_n"] = {{"value", ints(l.tile_cluster_n)}, {"source", tile_src}};
  t["setup_us"] = {{"value", l.tile_setup_us}, {"source", tile_src}};
  t["per_k_ns"] = {{"value", l.tile_per_k_ns}, {"source", tile_src}};
}

void split_k_keys(Json& s, const hardware::ContentionModel::SplitKReduce& r,
                  const std::string& files) {
  const std::string src =
      "[meas] cuBLASLt's splitKreduce_kernel after nvjet's split-K slices, as recorded by the "
      "PyTorch profiler: least squares of its time against the bytes it reads (fp32 slices) "
      "and writes (bf16) (calibrate::fit_split_k_reduce, " +
      files + ")";
  s["split_k_reduce_setup_us"] = {{"value", tidy(r.setup_us)}, {"source", src}};
  s["split_k_reduce_GBps"] = {{"value", std::round(r.GBps)}, {"source", src}};
}

void split_k_wave_keys(Json& s, const hardware::ContentionModel::SplitKReduce& r,
                       const std::string& file, int columns) {
  const std::string src = fmt::format(
      "[meas] the split-K reduction beside held SMs, timed by the PyTorch profiler ({}, the "
      "GEMMs of {} columns; the others held out): β and the time no wave stretches that bring "
      "the model's slowdowns closest (calibrate::fit_split_k_waves)",
      file, columns);
  s["split_k_reduce_lone_block"] = {{"value", tidy(r.lone_block)}, {"source", src}};
  s["split_k_reduce_fixed_us"] = {{"value", tidy(r.fixed_us)}, {"source", src}};
}

Json profile_section(const hardware::ContentionModel& m, const std::string& data,
                     const std::string& clusters, const std::map<std::string, double>& gains,
                     const std::string& clock_data) {
  const std::string src = "[meas] fitted by twin-fit-contention on our H200 (" + data +
                          "; reports/calibration/contention/README.md)";
  const std::string clock_src =
      "[meas] the SM clock with 56-112 SMs held over the clock alone, median over the "
      "family's cases, on our H200 (contention_bench.py --clock: " +
      clock_data + ")";
  const std::string cluster_src =
      "[meas] calibrate/cluster_probe.py on our H200: CTAs in clusters resident "
      "beside k holders (reports/calibration/clusters/" +
      clusters + "; 0: blocked)";
  Json s;
  const auto counts = [](const std::vector<double>& v) {
    return std::vector<int>(v.begin(), v.end());
  };
  s["clusters"]["gpcs"] = {{"value", m.gpcs},
                           {"source",
                            "[meas] the SM ids of clusters of 8 and 16 beside no holder "
                            "(reports/calibration/clusters/" +
                                clusters + ")"}};
  s["clusters"]["held_sms"] = {{"value", counts(m.cluster_held_sms)}, {"source", cluster_src}};
  for (int t = 0; t < 4; ++t)
    s["clusters"]
     ["c" + std::to_string(hardware::ContentionModel::kClusterSizes[t]) + "_usable_sms"] = {
         {"value", counts(m.cluster_usable_sms[t])}, {"source", cluster_src}};
  for (const auto f :
       {hardware::Family::gemm, hardware::Family::gemm_fp8, hardware::Family::grouped_gemm,
        hardware::Family::attention, hardware::Family::attention_bwd}) {
    const auto& p = m.of(f);
    const std::string name(hardware::family_name(f));
    s[name] = {{"boost_max",
                {{"value", tidy(p.boost_max)}, {"source", gains.count(name) ? clock_src : src}}},
               {"cluster_sms",
                {{"value", p.cluster_sms},
                 {"source",
                  "[meas] the measured kernels' names (nvjet ..._1x2_, _2x1_; "
                  "QuACK/CUTLASS grouped GEMMs assumed alike [est])"}}},
               {"fixed_us", {{"value", p.fixed_us}, {"source", src}}},
               {"sat_sms", {{"value", tidy(p.sat_sms)}, {"source", src}}},
               {"knee", {{"value", p.knee}, {"source", src}}}};
  }
  const std::string block_src =
      "[meas] the family's kernels' launches on our H200 (PyTorch profiler records in " + data +
      "): the median block by registers";
  for (int i = static_cast<int>(hardware::Family::ew_add); i < hardware::kFamilies; ++i)
    s[std::string(hardware::family_name(static_cast<hardware::Family>(i)))] = {
        {"sat_sms", {{"value", tidy(m.family[i].sat_sms)}, {"source", src}}},
        {"gpc_queue", {{"value", tidy(m.family[i].gpc_queue)}, {"source", src}}},
        {"knee", {{"value", m.family[i].knee}, {"source", src}}},
        {"lone_block", {{"value", m.family[i].lone_block}, {"source", src}}},
        {"hbm_fraction",
         {{"value", m.family[i].hbm_fraction},
          {"source",
           "[meas] the family's kernels alone on our H200, bytes / time over a device "
           "copy's bandwidth in the same file (mean over kernels, largest case each; " +
               data + ")"}}},
        {"block_threads", {{"value", m.family[i].block.threads}, {"source", block_src}}},
        {"block_registers", {{"value", m.family[i].block.registers}, {"source", block_src}}},
        {"block_smem_bytes", {{"value", m.family[i].block.smem_bytes}, {"source", block_src}}}};
  return s;
}

// One SVG per family of `cases` in `dir`, named <family><suffix>.svg.
void write_plots(const std::vector<calibrate::ContentionCase>& cases,
                 const hardware::ContentionModel& m, const std::string& dir,
                 const std::string& suffix) {
  std::map<std::string, std::vector<const calibrate::ContentionCase*>> groups;
  for (const auto& c : cases)
    if (c.group.find(':') == std::string::npos) groups[c.group].push_back(&c);
  for (const auto& [g, cs] : groups) {
    const std::string file = dir + "/" + g + suffix + ".svg";
    std::ofstream f(file);
    f << calibrate::contention_svg(g, cs, calibrate::model_for(g, m));
    if (!f) throw std::runtime_error(file + ": cannot write");
  }
}

// The command line, as parsed.
struct FitArgs {
  std::vector<std::string> files, clock_files;
  std::string out, svg_dir, waves_file;
  int waves_columns = 0;
  calibrate::BaseFiles base;
  double held_out_hbm_scale = 1;
};

void add_options(CLI::App& app, FitArgs& a) {
  auto& [clusters, lone_cta, split_k_files, held_out_files] = a.base;
  app.add_option("files", a.files,
                 "measurement files (a later file's classes replace an earlier's)")
      ->required();
  app.add_option("--clusters", clusters,
                 "cluster_probe.py's result: the usable SMs of clustered kernels")
      ->required();
  app.add_option("--clocks", a.clock_files,
                 "contention_bench.py --clock results: the compute families' clock "
                 "gain b_max, measured rather than fitted");
  app.add_option("--lone-cta", lone_cta,
                 "contention_bench.py --only lone_cta (lone_cta_wide) results: a lone cuBLAS "
                 "CTA's set-up and rate per kernel (mechanism 3), measured rather than fitted; "
                 "shapes of the --held-out files are left out");
  app.add_option("--split-k", split_k_files,
                 "contention_bench.py results with split-K GEMMs: cuBLASLt's reduction's time "
                 "alone against its bytes (a split-K launch as two kernels), measured");
  app.add_option("--split-k-waves", a.waves_file,
                 "contention_bench.py --launches-held result: the split-K reduction's β and "
                 "unstretched time beside held SMs, fitted on --split-k-waves-columns' GEMMs")
      ->needs("--split-k");
  app.add_option("--split-k-waves-columns", a.waves_columns,
                 "the columns (n) of the GEMMs --split-k-waves fits on; the others are held out")
      ->needs("--split-k-waves");
  app.add_option("--held-out", held_out_files,
                 "measurement files taken after the fit: their residuals per family, and with "
                 "--svg one plot per family (<family>_held_out.svg), every point held out");
  app.add_option("--held-out-hbm-scale", a.held_out_hbm_scale,
                 "the --held-out files' card's HBM bandwidth over the fitted card's (an H100 on "
                 "our H200's fit: 2,916 / 4,200, the profiles' gpu.hbm_bw_GBps): the elementwise "
                 "families' a_sat scale by it, as a profile's hbm_scale does")
      ->check(CLI::PositiveNumber);
  app.add_option("--out", a.out, "write the fitted section and residuals here (JSON)");
  app.add_option("--svg", a.svg_dir, "write one plot per family into this folder (SVG)");
}

// The fitted `contention` section with every source, the clock gains and the fit's residuals.
Json fit_document(const FitArgs& a, const hardware::ContentionModel& m,
                  const std::map<std::string, double>& gains,
                  const std::vector<calibrate::ContentionCase>& cases) {
  const auto& [clusters, lone_cta, split_k_files, held_out_files] = a.base;
  Json doc;
  doc["contention"] =
      profile_section(m, file_names(a.files), clusters.substr(clusters.find_last_of('/') + 1),
                      gains, file_names(a.clock_files));
  if (!lone_cta.empty())
    lone_cta_keys(doc["contention"], m.lone_cta, file_names(lone_cta), file_names(held_out_files));
  if (!split_k_files.empty())
    split_k_keys(doc["contention"], m.split_k_reduce, file_names(split_k_files));
  if (!a.waves_file.empty())
    split_k_wave_keys(doc["contention"], m.split_k_reduce, file_names({a.waves_file}),
                      a.waves_columns);
  doc["clock_gains"] = gains;
  if (!a.clock_files.empty())
    doc["clock_plateau_MHz"] = calibrate::measured_clock_plateau_MHz(a.clock_files);
  doc["residuals"] = calibrate::contention_residuals(cases, m);
  return doc;
}

void print_fit(const Json& doc) {
  for (const auto& [g, v] : doc["clock_gains"].items())
    fmt::print("clock gain {:16s} {:.2f}\n", g, v.get<double>());
  for (const auto& [g, r] : doc["residuals"].items())
    fmt::print(
        "{:16s} cases {:2d}  held-out: worst median over cases {:5.1f}%, worst point {:5.1f}%"
        "  (fitted points: worst {:5.1f}%)\n",
        g, r["cases"].get<int>(), 100 * r["held_out_worst_median"].get<double>(),
        100 * r["held_out_worst"].get<double>(), 100 * r["fitted_worst"].get<double>());
  fmt::print("{}\n", doc["contention"].dump(2));
}

// The --held-out files' cases, every point held out.
std::vector<calibrate::ContentionCase> held_out_cases(const std::vector<std::string>& files) {
  auto cases = files.empty() ? std::vector<calibrate::ContentionCase>{}
                             : calibrate::read_contention_cases(files);
  for (auto& c : cases)
    for (auto& p : c.points) p.fitted = false;
  return cases;
}

// Their residuals under the model as a profile of the held-out card would run it.
void add_held_out(Json& doc, const std::vector<calibrate::ContentionCase>& held_out,
                  const hardware::ContentionModel& on_card, const std::string& files) {
  if (held_out.empty()) return;
  doc["held_out_residuals"] = calibrate::contention_residuals(held_out, on_card);
  for (const auto& [g, r] : doc["held_out_residuals"].items())
    fmt::print(
        "{:16s} cases {:2d}  held-out files ({}): worst median over cases {:5.1f}%, worst "
        "point {:5.1f}%\n",
        g, r["cases"].get<int>(), files, 100 * r["held_out_worst_median"].get<double>(),
        100 * r["held_out_worst"].get<double>());
}

bool write_json(const std::string& out, const Json& doc) {
  std::ofstream f(out + ".tmp");
  f << doc.dump(1) << "\n";
  return f && std::rename((out + ".tmp").c_str(), out.c_str()) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"twin-fit-contention: fit the SM-contention model to contention_bench.py's curves"};
  FitArgs a;
  add_options(app, a);
  CLI11_PARSE(app, argc, argv);
  try {
    const auto cases = calibrate::read_contention_cases(a.files);
    const auto gains = a.clock_files.empty() ? std::map<std::string, double>{}
                                             : calibrate::measured_clock_gains(a.clock_files);
    auto m = calibrate::fit_contention(cases, calibrate::fit_base(a.base), gains);
    if (!a.waves_file.empty())
      std::tie(m.split_k_reduce.lone_block, m.split_k_reduce.fixed_us) =
          calibrate::fit_split_k_waves(a.waves_file, a.waves_columns, m);
    Json doc = fit_document(a, m, gains, cases);
    print_fit(doc);
    const auto held_out = held_out_cases(a.base.held_out);
    auto on_card = m;  // the model as a profile of the held-out card would run it
    on_card.hbm_scale = a.held_out_hbm_scale;
    on_card.prepare();  // its tables follow the scale
    add_held_out(doc, held_out, on_card, file_names(a.base.held_out));
    if (!a.svg_dir.empty()) {
      std::filesystem::create_directories(a.svg_dir);
      write_plots(cases, m, a.svg_dir, "");
      write_plots(held_out, on_card, a.svg_dir, "_held_out");
    }
    if (!a.out.empty() && !write_json(a.out, doc)) {
      std::fprintf(stderr, "twin-fit-contention: cannot write %s\n", a.out.c_str());
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "twin-fit-contention: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
