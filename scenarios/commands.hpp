// The subcommands of `twin`. Each returns the process exit code; input errors propagate as
// InputError and become exit code 2 in main (only main exits).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "hardware/collective.hpp"
#include "scenarios/loader.hpp"
#include "scenarios/simulate.hpp"

namespace twin::scenarios {

struct CommonArgs {
  std::string scenario;
  std::vector<std::string> sets;
  std::string data_dir;
  bool json = false;
  std::uint64_t max_events = 2'000'000'000;  // a run past this stops with an error
  double max_memory_GiB = 0;                 // 0: three quarters of this machine's memory
  bool progress = false;                     // progress lines on stderr (twin: unless --quiet)
  bool quiet = false;                        // --quiet
  LoadOptions load_options() const;
  // The limits of a run from these arguments (simulate.hpp).
  RunOptions run_options() const;
  // Refuses (InputError, before any work) an output `path` of `option` that cannot be written or
  // must not be replaced (reports/output.hpp output_problem); "" is no output.
  void check_output(const std::string& path, const char* option) const;
};

struct RunArgs {
  std::string trace_file;
  std::vector<int> trace_ranks;
  bool trace_all_ranks = false;  // --trace-ranks all
  std::string plan_file;         // write one rank's launch plan here (scenarios/plan.hpp)
  int plan_rank = 0;
  bool plan_all_ranks = false;  // --plan-ranks all: plan_file is a folder of rank-N.json
  int samples = 0;              // > 0: also run shared.sample 0 … N−1 and report percentiles
  int jobs = 1;                 // threads for the samples
};

struct LadderArgs {
  std::string data_dir;
  std::vector<std::string> sets;  // KEY=VALUE applied to every rung
  int jobs = 1;
  bool json = false;
  bool progress = false;  // progress lines on stderr
};

struct SweepArgs {
  std::vector<std::string> grid;  // "key=v1,v2,..."
  int jobs = 1;
  std::string out;  // FILE.csv or FILE.json; stdout when empty
  // --shard I/N: only the points i with i mod N = I (0 ≤ I < N), written as a part that
  // `twin merge` joins with the others into the file one unsharded sweep writes.
  int shard = 0, shards = 1;
  // A point out of HBM whatever its timing is not simulated: its row says so (`oom`, `fits`,
  // `certain_oom`) and has no step metrics. `twin tune` asks for it; `twin sweep --skip-oom`.
  bool skip_certain_oom = false;
};
// "I/N" → (I, N); InputError naming --shard unless 0 ≤ I < N.
std::pair<int, int> parse_shard(const std::string& text);

// `twin tune`: every combination of --vary (a sweep), the configurations that run and fit ranked
// by the objective, the best explained against the scenario as given.
struct TuneArgs {
  std::vector<std::string> vary;  // "key=v1,v2,..."; empty: the default plan space (cmd_tune.cpp)
  std::string objective = "tokens_per_s_per_gpu";  // or tokens_per_day
  bool any = false;                                // rank configurations that do not fit too
  int top = 5;
  std::size_t budget_points = 1000;  // a larger space: coordinate search (cmd_tune.cpp)
  int jobs = 1;
};
Json tune_json(const CommonArgs& args, const TuneArgs& tune);
int cmd_tune(const CommonArgs& args, const TuneArgs& tune, std::ostream& out);

// `twin compare --kineto TRACE SCENARIO`: a PyTorch profiler trace's step beside the twin's
// prediction of one rank of the scenario (cmd_compare.cpp).
struct CompareArgs {
  std::string kineto;  // the trace (.json or .json.gz)
  std::string step;    // its ProfilerStep#N; "" = the last
  int rank = 0;
};
Json compare_json(const CommonArgs& args, const CompareArgs& cmp);
int cmd_compare(const CommonArgs& args, const CompareArgs& cmp, std::ostream& out);

// `twin replay --kineto TRACE SCENARIO`: the trace's step re-simulated by the engine on the
// scenario's machine, or on the machine --to describes (cmd_replay.cpp, trace_replay.hpp).
struct ReplayArgs {
  std::string kineto;           // the trace (.json or .json.gz)
  std::string step;             // its ProfilerStep#N; "" = the last
  std::vector<std::string> to;  // "KEY=VALUE" overrides of the machine to re-simulate on
};
Json replay_json(const CommonArgs& args, const ReplayArgs& rp);
int cmd_replay(const CommonArgs& args, const ReplayArgs& rp, std::ostream& out);

struct MergeArgs {
  std::vector<std::string> parts;  // `twin sweep --shard I/N --out PART` files, one per shard
  std::string out;                 // FILE.csv or FILE.json; stdout (CSV) when empty
  bool json = false;
};
int cmd_merge(const MergeArgs& args, std::ostream& out);

// The first line of a sweep's progress file: the arguments, a hash of the resolved scenario and
// the twin's version; a progress file with another first line is not resumed.
std::string sweep_progress_header(const CommonArgs& args, const SweepArgs& sw);
// The points of the grid (InputError on a malformed --grid or one of more than 10⁶ points).
std::size_t sweep_points(const SweepArgs& sw);
// A --grid or --vary axis, "KEY=V1,V2,..." (InputError if malformed or a key is repeated).
struct Axis {
  std::string key;
  std::vector<std::string> values;
};
std::vector<Axis> parse_grid(const std::vector<std::string>& grid);

struct PlanDpArgs {
  std::vector<int> replicas{1, 2, 4};
  std::string placement;  // packed | spread | random | slurm | a node-list file, or several,
                          // comma-separated; "" = the scenario's
  double tokens = 15e12;  // token budget for days_to_tokens
  int jobs = 1;
  int samples = 0;  // > 0: draws of the shared machine (shared.sample 0 … N−1), percentiles
  std::int64_t seed = -1;  // ≥ 0: placement.seed (the draws' seed)
  bool split = false;      // also the shared machine's effects one at a time (cumulative)
};

struct MemoryArgs {
  std::string events_file;    // write one rank's allocation sequence here
  std::string snapshot_file;  // write one rank's allocator snapshot here (memory_snapshot.hpp)
  int events_rank = 0;        // the rank of both
};

struct KernelArgs {
  std::string kernel;  // gemm, gemm_fp8, grouped_static, grouped_dynamic, attention_fwd/bwd, ew_*
  std::vector<double> shape;  // per kernel: M,N,K | ROWS,N,K,EXPERTS | FLOPS | BYTES
  std::vector<int> held_sms{0, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 100, 112, 124};
  std::string beside_collective;  // "KIND,BYTES,CTAS": also run it beside this collective
  double alone_us = 0;            // the kernel's measured time alone (0: the cost model's)
  std::string profile;            // short for --set hardware.profile=NAME ("": the scenario's)
  std::string nvjet;  // gemm: the launch cuBLAS made, by its kernel's name ("": the twin's choice)
  double grid = 0;    // that launch's CTAs (0: its tiles padded to whole clusters)
};

// `twin collective`: one collective alone, per size, in nccl-tests' columns (cmd_collective.cpp).
struct CollectiveArgs {
  std::string kind = "all_gather";  // all_gather | reduce_scatter | all_reduce | all_to_all
  int ranks = 4;
  std::vector<double> bytes;            // nccl-tests' size: the full buffer
  int ctas = 16;                        // NCCL's own channel count (capped by nccl.max_ctas)
  std::vector<std::string> nccl_tests;  // real nccl-tests logs: their rows beside the twin's (kind,
                                        // ranks, bytes ignored)
};
Json collective_json(const CommonArgs& args, const CollectiveArgs& a);
// all_gather | reduce_scatter | all_reduce | all_to_all → its kind; InputError naming `option`.
hardware::CollKind collective_kind(const std::string& name, const std::string& option);
int cmd_collective(const CommonArgs& args, const CollectiveArgs& a, std::ostream& out);

struct ReportArgs {
  bool ladder = false;              // add the ladder (simulates every rung)
  std::vector<std::string> sweeps;  // `twin sweep` outputs (CSV or JSON)
  std::string plan_dp;              // `twin plan-dp --json` output
  CompareArgs kineto;  // a real trace to draw beside the twin (kineto.kineto "" = none)
  std::string out;     // the HTML file
  int jobs = 1;
};

int cmd_model(const CommonArgs& args, std::ostream& out);
int cmd_report(const CommonArgs& args, const ReportArgs& rep, std::ostream& out);
int cmd_kernel(const CommonArgs& args, const KernelArgs& k, std::ostream& out);
int cmd_ladder(const LadderArgs& args, std::ostream& out);
int cmd_sweep(const CommonArgs& args, const SweepArgs& sweep, std::ostream& out);
Json ladder_json(const LadderArgs& args);
// `progress`: the resumable progress file ("" for none), see cmd_sweep.cpp.
Json sweep_json(const CommonArgs& args, const SweepArgs& sweep, const std::string& progress = "");
std::string to_csv(const Json& rows);
// A sweep's rows from its CSV or JSON file (`twin sweep --out`); InputError on a bad file.
Json read_sweep_rows(const std::string& file);
int cmd_run(const CommonArgs& args, const RunArgs& run, std::ostream& out);

// `twin import-torchtitan JOB.toml --nodes N`: args.scenario is the TOML job file.
struct ImportArgs {
  int nodes = 1;
  int gpus_per_node = 0;  // 0: the profile's
  std::string profile = "h100-sxm";
  std::string out;   // the scenario file to write; stdout when empty (unless --run)
  bool run = false;  // simulate it (twin run) instead of printing it
};
int cmd_import_torchtitan(const CommonArgs& args, const ImportArgs& a, std::ostream& out);
int cmd_plan_dp(const CommonArgs& args, const PlanDpArgs& plan, std::ostream& out);
Json plan_dp_json(const CommonArgs& args, const PlanDpArgs& plan);
// --placement A,B,…: plan_dp_json per placement, and per replica count each one's tok/s/GPU.
Json plan_dp_compare_json(const CommonArgs& args, const PlanDpArgs& plan);
int cmd_memory(const CommonArgs& args, const MemoryArgs& mem, std::ostream& out);
void print_memory(std::ostream& out, const reports::MemoryReport& memory);
int cmd_resolve(const CommonArgs& args, std::ostream& out);
int cmd_help_params(bool json, std::ostream& out);

// The accounting of a loaded scenario as JSON (also embedded in other outputs).
Json accounting_json(const Scenario& s);

}  // namespace twin::scenarios
