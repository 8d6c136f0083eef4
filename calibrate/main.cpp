// twin-calibrate: runs the real kernels, copies and collectives on the visible GPUs, fits the
// engine's parameters and writes a hardware-profile overlay with provenance.
#include <CLI/CLI.hpp>

#include <chrono>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <unistd.h>

#include "calibrate/benches.hpp"
#include "calibrate/harness.hpp"

#ifdef TWIN_HAVE_NCCL
#include <nccl.h>
#endif

using namespace twin::calibrate;

namespace {

Json provenance(int argc, char** argv, const std::string& commit) {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "device properties");
  int driver = 0, runtime = 0, clock_khz = 0, mem_clock_khz = 0, devices = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, 0);
  cudaGetDeviceCount(&devices);
  std::string cmd;
  for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  int nccl = 0;
#ifdef TWIN_HAVE_NCCL
  ncclGetVersion(&nccl);
#endif
  return {{"gpu", prop.name}, {"gpus_visible", devices}, {"sm_count", prop.multiProcessorCount},
          {"smem_per_sm_KiB", prop.sharedMemPerMultiprocessor / 1024}, {"hbm_GiB", double(prop.totalGlobalMem) / (1 << 30)},
          {"sm_clock_max_MHz", clock_khz / 1000}, {"mem_clock_max_MHz", mem_clock_khz / 1000},
          {"cuda_driver", driver}, {"cuda_runtime", runtime}, {"nccl", nccl}, {"host", host},
          {"date", date}, {"command", cmd}, {"commit", commit}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
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
      "2 bad options; 1 a benchmark or the write failed."};
  std::string out = "h200-measured.json", name = "h200-measured", base = "h200", commit = "unknown";
  Options o;
  std::vector<std::string> only;
  app.add_option("--out", out, "profile overlay to write");
  app.add_option("--name", name, "profile name");
  app.add_option("--base", base, "profile the overlay is based on (hardware/profiles/<base>.json)");
  app.add_option("--commit", commit, "source commit, recorded in the provenance");
  app.add_option("--reps", o.reps, "timed repetitions per measurement (median reported)");
  app.add_flag("--quick", o.quick, "fewer sizes and repetitions (a smoke run)");
  app.add_option("--nccl-ctas", o.nccl_ctas,
                 "maxCTAs values for the NCCL benchmark (0: NCCL's default or $NCCL_MAX_CTAS)")
      ->delimiter(',');
  app.add_option("--only", only, "benchmarks to run: gemm grouped contention copies copy_gemm ns ns_cpu fp8 nccl")
      ->delimiter(',');
  bool quiet = false;
  app.add_flag("--quiet", quiet, "no progress lines on stderr");
  CLI11_PARSE(app, argc, argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "twin-calibrate: no CUDA GPU visible: nothing measured\n");
    return 3;
  }
  if (o.quick) o.reps = std::min(o.reps, 3), o.nccl_ctas = {16};
  const std::vector<std::pair<std::string, void (*)(const Options&, Json&)>> benches = {
      {"gemm", bench_gemm},   {"grouped", bench_grouped},   {"contention", bench_contention},
      {"copies", bench_copies}, {"copy_gemm", bench_copy_beside_gemm}, {"ns", bench_newton_schulz}, {"ns_cpu", bench_newton_schulz_cpu},
      {"fp8", bench_fp8},     {"nccl", bench_nccl}};
  Json m;
  try {
    std::vector<std::pair<std::string, void (*)(const Options&, Json&)>> chosen;
    for (const auto& b : benches)
      if (only.empty() || std::find(only.begin(), only.end(), b.first) != only.end()) chosen.push_back(b);
    // Each benchmark takes seconds to minutes: say which one runs and how long it took (on
    // stderr; reports/'s progress meter is not calibrate/'s to use, STYLE.md's layering).
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < chosen.size(); ++i) {
      if (!quiet) std::fprintf(stderr, "twin-calibrate: %s (%zu of %zu)...\n", chosen[i].first.c_str(), i + 1, chosen.size());
      chosen[i].second(o, m);
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      if (!quiet) std::fprintf(stderr, "twin-calibrate: %s done, %.0f s so far\n", chosen[i].first.c_str(), took.count());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "twin-calibrate: error: %s\n", e.what());
    return 1;
  }
  Json profile = fit_profile(m);
  profile["name"] = name;
  profile["base"] = base;
  profile["description"] = "Measured by twin-calibrate; values not measured come from the base profile";
  profile["provenance"] = provenance(argc, argv, commit);
  profile["measurements"] = m;
  // Ordered: name, base, description first, as a reader expects.
  Json ordered{{"name", profile["name"]}, {"base", profile["base"]}, {"description", profile["description"]}};
  for (const auto& [k, v] : profile.items())
    if (!ordered.contains(k)) ordered[k] = v;
  const std::string tmp = out + ".tmp";
  {
    std::ofstream f(tmp);
    f << ordered.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "twin-calibrate: cannot write %s\n", tmp.c_str());
      return 1;
    }
  }
  std::rename(tmp.c_str(), out.c_str());
  std::printf("wrote %s\n", out.c_str());
  return 0;
}
