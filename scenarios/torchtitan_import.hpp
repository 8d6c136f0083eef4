// TorchTitan job files (TOML) as twin scenarios: `twin import-torchtitan`. Every key of the job
// file is either mapped to a scenario key, recognised as having no effect on one step's time
// or memory (logging, checkpointing, learning rate, data source), or reported as not modelled.
// TorchTitan's TOML layout as of its job_config.py before the move to Python configs (2026-02):
// [model] name/flavor/converters, [training] local_batch_size (batch_size in older files)/
// seq_len, [parallelism] *_degree and enable_async_tensor_parallel, [activation_checkpoint]
// mode, [compile] enable (training.compile in older files), [quantize.linear.float8] (or
// [float8]) enable_fsdp_float8_all_gather / precompute_float8_dynamic_scale_for_fsdp.
#pragma once

#include <string>
#include <vector>

#include "scenarios/loader.hpp"

namespace twin::scenarios {

struct TorchtitanMachine {
  int nodes = 0;          // nodes the job runs on
  int gpus_per_node = 0;  // 0: the profile's
  std::string profile = "h100-sxm";
};

struct ImportedJob {
  Json scenario;                       // a scenario file's content
  std::vector<std::string> mapped;     // "toml.key → scenario.key = value"
  std::vector<std::string> no_effect;  // keys that change nothing in one step
  std::vector<std::string> ignored;    // keys the twin does not model, with why
};

// Maps a TorchTitan job file; InputError (file, TOML key, what was expected) for a syntax error,
// an unknown model flavor, or a plan the twin cannot run (pipeline or context parallelism).
ImportedJob import_torchtitan(const std::string& toml_file, const TorchtitanMachine& machine,
                              int profile_gpus_per_node);

}  // namespace twin::scenarios
