// twin-calibrate's collective measurements and nccl-tests logs, both ways (issue #20, item 4):
// its own results written in nccl-tests' columns (hardware/nccl_tests.hpp), and real
// all_gather_perf / reduce_scatter_perf / all_reduce_perf / alltoall_perf logs turned into the
// profile's collective tables (`measurements.nccl`, the layout bench_nccl.cpp writes).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace twin::calibrate {

using Json = nlohmann::ordered_json;

// `measurements.nccl` ({"gpus", "results": [{collective, max_ctas, bytes, median_ms, busbw_GBps}]})
// as one nccl-tests log per collective (a test per CTA setting, its NCCL_MAX_CTAS stated as NCCL's
// INFO output states it): file name → text. `device` names the GPU.
std::map<std::string, std::string> nccl_tests_logs(const Json& nccl, const std::string& device);

// Real nccl-tests logs → `measurements.nccl` (out-of-place times; each test's NCCL_MAX_CTAS as its
// NCCL INFO line states it, else `max_ctas`, 0: NCCL's default). Every log must be of the same
// number of ranks. Throws std::runtime_error naming the file and line.
Json import_nccl_tests(const std::vector<std::string>& files, int max_ctas);

}  // namespace twin::calibrate
