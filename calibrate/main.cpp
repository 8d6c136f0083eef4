// twin-calibrate: runs the real kernels, copies and collectives on the visible GPUs, fits the
// engine's parameters and writes a hardware-profile overlay with provenance.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>

#include "calibrate/benches.hpp"
#include "calibrate/gemm_fit.hpp"
#include "calibrate/harness.hpp"
#include "calibrate/nccl_tests_io.hpp"

#ifdef TWIN_HAVE_NCCL
#include <nccl.h>
#endif

using namespace twin::calibrate;

namespace {

std::string command_line(int argc, char** argv) {
  std::string cmd;
  for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
  return cmd;
}

Json provenance(int argc, char** argv, const std::string& commit) {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "device properties");
  int driver = 0, runtime = 0, clock_khz = 0, mem_clock_khz = 0, devices = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, 0);
  cudaGetDeviceCount(&devices);
  const std::string cmd = command_line(argc, argv);
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  int nccl = 0;
#ifdef TWIN_HAVE_NCCL
  ncclGetVersion(&nccl);
#endif
  return {{"gpu", prop.name},
          {"gpus_visible", devices},
          {"sm_count", prop.multiProcessorCount},
          {"smem_per_sm_KiB", prop.sharedMemPerMultiprocessor / 1024},
          {"hbm_GiB", double(prop.totalGlobalMem) / (1 << 30)},
          {"sm_clock_max_MHz", clock_khz / 1000},
          {"mem_clock_max_MHz", mem_clock_khz / 1000},
          {"cuda_driver", driver},
          {"cuda_runtime", runtime},
          {"nccl", nccl},
          {"host", host},
          {"date", date},
          {"command", cmd},
          {"commit", commit}};
}

// Writes `text` to `path` whole or not at all (a temporary file renamed over it).
bool write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << text;
    if (!f) {
      std::fprintf(stderr, "twin-calibrate: cannot write %s\n", tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::fprintf(stderr, "twin-calibrate: cannot write %s\n", path.c_str());
    return false;
  }
  return true;
}

// A profile's collective measurements as nccl-tests logs in `dir`, one per collective and CTA
// setting.
bool write_nccl_tests_logs(const Json& nccl, const std::string& device, const std::string& dir) {
  for (const auto& [file, text] : nccl_tests_logs(nccl, device)) {
    if (!write_file(dir + "/" + file, text)) return false;
    std::printf("wrote %s/%s\n", dir.c_str(), file.c_str());
  }
  return true;
}

// --import-nccl-tests and --nccl-tests-from: no GPU needed. Returns the exit code.
int nccl_tests_only(int argc, char** argv, const std::vector<std::string>& logs, int max_ctas,
                    const std::string& from, const std::string& dir, const std::string& out,
                    const std::string& name, const std::string& base) {
  try {
    if (!from.empty()) {
      std::ifstream in(from);
      if (!in) throw std::runtime_error(from + ": cannot open");
      const Json p = Json::parse(in);
      const Json* nccl = p.contains("measurements") && p["measurements"].contains("nccl")
                             ? &p["measurements"]["nccl"]
                             : nullptr;
      if (!nccl || !nccl->contains("results"))
        throw std::runtime_error(from +
                                 ": measurements.nccl.results: expected "
                                 "twin-calibrate's collective measurements");
      return write_nccl_tests_logs(*nccl, p.value("provenance", Json::object()).value("gpu", "GPU"),
                                   dir)
                 ? 0
                 : 1;
    }
    Json m = import_nccl_tests(logs, max_ctas);
    const Json profile{
        {"name", name},
        {"base", base},
        {"description",
         "Collective tables imported from nccl-tests logs by twin-calibrate; values not "
         "measured come from the base profile"},
        {"provenance", {{"command", command_line(argc, argv)}}},
        {"measurements", {{"nccl", std::move(m)}}}};
    if (!write_file(out, profile.dump(2) + "\n")) return 1;
    std::printf("imported %zu results of %d ranks from %zu logs; wrote %s\n",
                profile["measurements"]["nccl"]["results"].size(),
                profile["measurements"]["nccl"]["gpus"].get<int>(), logs.size(), out.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "twin-calibrate: error: %s\n", e.what());
    return 2;
  }
}

// The command line, as parsed.
struct Cli {
  std::string out = "h200-measured.json", name = "h200-measured", base = "h200", commit = "unknown",
              profiles_dir = "hardware/profiles";
  Options o;
  std::vector<std::string> only;
  bool quiet = false;
  std::vector<std::string> import_logs;
  std::string tests_dir, tests_from;
  int max_ctas = 0;
};

constexpr const char* kAbout =
    "twin-calibrate: measure the GPU, host and interconnect of a Hopper node and write a twin "
    "hardware profile (an overlay of a base profile, every value with its source).\n\n"
    "On our H200 machine:  build/twin-calibrate --out hardware/profiles/h200-measured.json\n"
    "On a JUPITER node (aarch64, 4 GH200): build twin with nvcc on the node, then\n"
    "  srun -N1 --ntasks=1 --gpus-per-task=4 --cpus-per-task=72 \\\n"
    "       build/twin-calibrate --base jupiter-gh200 --name jupiter-measured \\\n"
    "       --out hardware/profiles/jupiter-measured.json --commit $(git rev-parse HEAD)\n"
    "and run scenarios with --set hardware.profile=jupiter-measured. Collective benchmarks run\n"
    "when two or more GPUs are visible (one process drives them all).\n\n"
    "Exit codes: 0 measured and written; 3 no CUDA GPU visible (nothing measured or written); "
    "2 bad options; 1 a benchmark or the write failed.";

void add_options(CLI::App& app, Cli& a) {
  Options& o = a.o;
  app.add_option("--out", a.out, "profile overlay to write");
  app.add_option("--name", a.name, "profile name");
  app.add_option("--base", a.base,
                 "profile the overlay is based on (hardware/profiles/<base>.json)");
  app.add_option("--commit", a.commit, "source commit, recorded in the provenance");
  app.add_option("--profiles-dir", a.profiles_dir,
                 "folder of the base profile, whose fixed cost per kernel and peak the GEMM fit "
                 "keeps");
  app.add_option("--reps", o.reps, "timed repetitions per measurement (median reported)");
  app.add_flag("--quick", o.quick, "fewer sizes and repetitions (a smoke run)");
  app.add_option("--lead-us", o.lead_us,
                 "one GPU's kernels: a GPU sleep this long per timed run goes ahead of the runs, "
                 "so that the host's enqueue is not timed (0: each run on an idle GPU, the "
                 "host's enqueue timed too, as before 2026-12-05)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--nccl-ctas", o.nccl_ctas,
                 "maxCTAs values for the NCCL benchmark (0: NCCL's default or $NCCL_MAX_CTAS)")
      ->delimiter(',');
  app.add_option("--only", a.only,
                 "benchmarks to run: gemm grouped contention copies copy_gemm ns ns_cpu fp8 nccl")
      ->delimiter(',');
  app.add_flag("--quiet", a.quiet, "no progress lines on stderr");
  app.add_option("--import-nccl-tests", a.import_logs,
                 "real nccl-tests logs (all_gather_perf, reduce_scatter_perf, "
                 "all_reduce_perf, alltoall_perf output) to turn into the profile's collective "
                 "tables (no GPU needed)");
  app.add_option("--max-ctas", a.max_ctas,
                 "the NCCL_MAX_CTAS the imported logs ran with (0: NCCL's default)")
      ->capture_default_str();
  app.add_option("--nccl-tests-dir", a.tests_dir,
                 "also write the collective results as nccl-tests logs in this folder");
  app.add_option("--nccl-tests-from", a.tests_from,
                 "a measured profile whose collective results to write as nccl-tests "
                 "logs in --nccl-tests-dir (no GPU needed)");
}

using Bench = std::pair<std::string, void (*)(const Options&, Json&)>;

// The benchmarks --only names (all without it), in their fixed order.
std::vector<Bench> chosen_benches(const std::vector<std::string>& only) {
  const std::vector<Bench> benches = {{"gemm", bench_gemm},
                                      {"grouped", bench_grouped},
                                      {"contention", bench_contention},
                                      {"copies", bench_copies},
                                      {"copy_gemm", bench_copy_beside_gemm},
                                      {"ns", bench_newton_schulz},
                                      {"ns_cpu", bench_newton_schulz_cpu},
                                      {"fp8", bench_fp8},
                                      {"nccl", bench_nccl}};
  std::vector<Bench> chosen;
  for (const auto& b : benches)
    if (only.empty() || std::find(only.begin(), only.end(), b.first) != only.end())
      chosen.push_back(b);
  return chosen;
}

// Runs them into m. Each takes seconds to minutes: says which one runs and how long it took (on
// stderr; reports/'s progress meter is not calibrate/'s to use, STYLE.md's layering).
void run_benches(const std::vector<Bench>& chosen, const Options& o, bool quiet, Json& m) {
  m["lead_us"] = o.lead_us;
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    if (!quiet)
      std::fprintf(stderr, "twin-calibrate: %s (%zu of %zu)...\n", chosen[i].first.c_str(), i + 1,
                   chosen.size());
    chosen[i].second(o, m);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    if (!quiet)
      std::fprintf(stderr, "twin-calibrate: %s done, %.0f s so far\n", chosen[i].first.c_str(),
                   took.count());
  }
}

// The overlay: the fit of the measurements, named, with provenance and the raw measurements;
// name, base and description first, as a reader expects.
Json overlay(const Json& m, const std::optional<twin::hardware::Profile>& base_profile,
             const Cli& a, int argc, char** argv) {
  Json profile = fit_profile(m, base_profile);
  profile["name"] = a.name;
  profile["base"] = a.base;
  profile["description"] =
      "Measured by twin-calibrate; values not measured come from the base profile";
  profile["provenance"] = provenance(argc, argv, a.commit);
  profile["measurements"] = m;
  Json ordered{{"name", profile["name"]},
               {"base", profile["base"]},
               {"description", profile["description"]}};
  for (const auto& [k, v] : profile.items())
    if (!ordered.contains(k)) ordered[k] = v;
  return ordered;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{kAbout};
  Cli a;
  add_options(app, a);
  CLI11_PARSE(app, argc, argv);
  if (!a.tests_from.empty() && a.tests_dir.empty()) {
    std::fprintf(stderr, "twin-calibrate: --nccl-tests-from needs --nccl-tests-dir\n");
    return 2;
  }
  if (!a.import_logs.empty() || !a.tests_from.empty())
    return nccl_tests_only(argc, argv, a.import_logs, a.max_ctas, a.tests_from, a.tests_dir, a.out,
                           a.name, a.base);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "twin-calibrate: no CUDA GPU visible: nothing measured\n");
    return 3;
  }
  if (a.o.quick) a.o.reps = std::min(a.o.reps, 3), a.o.nccl_ctas = {16};
  const auto chosen = chosen_benches(a.only);
  // The GEMM fit keeps the base's fixed cost per kernel and peak: read before measuring, so that a
  // missing base costs no run (a bad option: exit 2).
  std::optional<twin::hardware::Profile> base_profile;
  try {
    if (std::any_of(chosen.begin(), chosen.end(), [](const auto& b) { return b.first == "gemm"; }))
      base_profile = gemm_profile(a.profiles_dir + "/" + a.base + ".json");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "twin-calibrate: error: --base %s: %s\n", a.base.c_str(), e.what());
    return 2;
  }
  Json m;
  try {
    run_benches(chosen, a.o, a.quiet, m);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "twin-calibrate: error: %s\n", e.what());
    return 1;
  }
  const Json profile = overlay(m, base_profile, a, argc, argv);
  if (!write_file(a.out, profile.dump(2) + "\n")) return 1;
  std::printf("wrote %s\n", a.out.c_str());
  if (!a.tests_dir.empty() && m.contains("nccl") && m["nccl"].contains("results") &&
      !write_nccl_tests_logs(m["nccl"], profile["provenance"]["gpu"].get<std::string>(),
                             a.tests_dir))
    return 1;
  return 0;
}
