#include "scenarios/torchtitan_import.hpp"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <filesystem>
#include <map>
#include <sstream>

namespace twin::scenarios {

namespace {

// Sections and keys that change nothing in one simulated step (what is logged, saved, the data
// source, the learning rate and its schedule, timeouts).
constexpr const char* kNoEffectPrefixes[] = {"job.",
                                             "profiling.",
                                             "metrics.",
                                             "checkpoint.",
                                             "validation.",
                                             "lr_scheduler.",
                                             "comm.",
                                             "fault_tolerance.",
                                             "memory_estimation.",
                                             "experimental.custom",
                                             "optimizer.lr",
                                             "optimizer.eps",
                                             "optimizer.weight_decay",
                                             "optimizer.beta",
                                             "optimizer.implementation",
                                             "model.tokenizer_path",
                                             "model.hf_assets_path",
                                             "model.print_after_conversion",
                                             "training.dataset",
                                             "training.steps",
                                             "training.seed",
                                             "training.deterministic",
                                             "training.max_norm",
                                             "training.gc_freq",
                                             "training.warmup_steps",
                                             "training.mixed_precision_reduce",
                                             "compile.components"};

// TorchTitan's Llama 3 flavors the twin has presets for (scenarios/models/).
const std::map<std::string, std::string> kLlamaFlavors = {
    {"8B", "llama3-8b"}, {"70B", "llama3-70b"}, {"405B", "llama3-405b"}};

// The job file's leaves by dotted key (tables flattened; arrays are leaves).
void flatten(const toml::table& t, const std::string& prefix,
             std::map<std::string, const toml::node*>& out) {
  for (const auto& [k, v] : t) {
    const std::string key =
        prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (const auto* sub = v.as_table())
      flatten(*sub, key, out);
    else
      out[key] = &v;
  }
}

std::string describe(const toml::node& n) {
  std::ostringstream s;
  if (const auto* str = n.as_string())
    s << '"' << str->get() << '"';
  else
    n.visit([&s](const auto& v) { s << v; });
  return s.str();
}

// Reads keys off the flattened file; every key read is marked handled.
class Reader {
 public:
  Reader(std::string file, std::map<std::string, const toml::node*> keys)
      : file_(std::move(file)), keys_(std::move(keys)) {}

  const toml::node* take(const std::string& key) {
    const auto it = keys_.find(key);
    if (it == keys_.end()) return nullptr;
    const toml::node* n = it->second;
    keys_.erase(it);
    return n;
  }
  // The first of `keys` present (newer name first), or nullptr.
  std::pair<std::string, const toml::node*> take_any(std::initializer_list<const char*> keys) {
    std::pair<std::string, const toml::node*> found{"", nullptr};
    for (const char* k : keys)
      if (const auto* n = take(k); n && !found.second) found = {k, n};
    return found;
  }
  template <class T>
  T as(const std::string& key, const toml::node& n, const char* expected) const {
    if (const auto v = n.value<T>()) return *v;
    throw InputError(file_, key, fmt::format("expected {}, got {}", expected, describe(n)));
  }
  const std::map<std::string, const toml::node*>& rest() const { return keys_; }
  const std::string& file() const { return file_; }

 private:
  std::string file_;
  std::map<std::string, const toml::node*> keys_;
};

struct Mapper {
  Reader& in;
  ImportedJob& out;
  Json& s;

  void note(const std::string& from, const std::string& to, const Json& value) {
    out.mapped.push_back(fmt::format("{} → {} = {}", from, to, value.dump()));
  }
  void ignore(const std::string& key, const toml::node& n, const std::string& why) {
    out.ignored.push_back(fmt::format("{} = {}: {}", key, describe(n), why));
  }
  std::int64_t integer(std::initializer_list<const char*> keys, std::int64_t def) {
    const auto [k, n] = in.take_any(keys);
    return n ? in.as<std::int64_t>(k, *n, "an integer") : def;
  }
  std::optional<bool> boolean(std::initializer_list<const char*> keys,
                              std::string* from = nullptr) {
    const auto [k, n] = in.take_any(keys);
    if (!n) return std::nullopt;
    if (from) *from = k;
    return in.as<bool>(k, *n, "true or false");
  }

  void model() {
    const auto* name = in.take("model.name");
    const std::string family =
        name ? in.as<std::string>("model.name", *name, "a string") : "llama3";
    if (family != "llama3")
      throw InputError(
          in.file(), "model.name",
          fmt::format("\"{}\": the twin has TorchTitan presets for llama3 only", family));
    const auto* flavor = in.take("model.flavor");
    const std::string f = flavor ? in.as<std::string>("model.flavor", *flavor, "a string") : "";
    const auto it = kLlamaFlavors.find(f);
    if (it == kLlamaFlavors.end())
      throw InputError(in.file(), "model.flavor",
                       fmt::format("\"{}\": expected one of 8B, 70B, 405B (scenarios/models/)", f));
    s["model"] = {{"preset", it->second}};
    note("model.name, model.flavor", "model.preset", it->second);
  }

  // Float8 linear layers: a converter in [model] (newer) or [float8] enable_float8_linear
  // (older), with the FSDP options under [quantize.linear.float8] or [float8].
  void float8(Json& t) {
    bool on = false;
    if (const auto* conv = in.take("model.converters")) {
      const auto* arr = conv->as_array();
      if (!arr) throw InputError(in.file(), "model.converters", "expected an array of strings");
      for (const auto& c : *arr) {
        const auto name = c.value<std::string>().value_or("");
        if (name == "float8" || name == "quantize.linear.float8")
          on = true;
        else
          ignore("model.converters", c, "only the float8 linear converter is modelled");
      }
    }
    if (const auto old = boolean({"float8.enable_float8_linear"})) on = on || *old;
    t["float8"] = on;
    note("model.converters", "training.float8", on);
    for (const char* opt :
         {"enable_fsdp_float8_all_gather", "precompute_float8_dynamic_scale_for_fsdp"}) {
      std::string from;
      const auto v = boolean({fmt::format("quantize.linear.float8.{}", opt).c_str(),
                              fmt::format("float8.{}", opt).c_str()},
                             &from);
      if (!v) continue;
      const char* to = opt[0] == 'e' ? "float8_all_gather" : "float8_precompute_scale";
      t[to] = *v && on;
      note(from, std::string("training.") + to, *v && on);
    }
    for (const char* sec : {"quantize.linear.float8.", "float8."}) {
      if (const auto* r = in.take(std::string(sec) + "recipe_name")) {
        if (r->value<std::string>().value_or("") != "tensorwise")
          ignore(std::string(sec) + "recipe_name", *r, "the twin models tensorwise scaling");
      }
      if (const auto* ff = in.take(std::string(sec) + "filter_fqns")) {
        const auto* arr = ff->as_array();
        const bool output_only =
            arr && arr->size() == 1 && (*arr)[0].value<std::string>() == "output";
        if (!output_only)
          ignore(std::string(sec) + "filter_fqns", *ff,
                 "the twin converts every linear layer but the output layer");
      }
    }
  }

  // [activation_checkpoint]: none, per-op selective or full.
  void checkpointing(Json& t) {
    const auto* mode = in.take("activation_checkpoint.mode");
    const std::string ac =
        mode ? in.as<std::string>("activation_checkpoint.mode", *mode, "a string") : "selective";
    if (ac == "none" || ac == "selective" || ac == "full") {
      t["activation_checkpointing"] = ac;
    } else {
      t["activation_checkpointing"] = "selective";
      ignore("activation_checkpoint.mode", *mode, "modelled as selective (op policy)");
    }
    note("activation_checkpoint.mode", "training.activation_checkpointing",
         t["activation_checkpointing"]);
    if (const auto* opt = in.take("activation_checkpoint.selective_ac_option")) {
      if (opt->value<std::string>().value_or("") != "op" && ac == "selective")
        ignore("activation_checkpoint.selective_ac_option", *opt,
               "layer-wise selective checkpointing is modelled as the per-op policy");
      else
        note("activation_checkpoint.selective_ac_option", "training.activation_checkpointing",
             t["activation_checkpointing"]);
    }
  }

  void training(std::int64_t data_ranks) {
    Json t;
    const auto rows = integer({"training.local_batch_size", "training.batch_size"}, 8);
    t["rows_per_gpu"] = rows;
    note("training.local_batch_size", "training.rows_per_gpu", rows);
    const auto seq = integer({"training.seq_len"}, 2048);
    t["seq_len"] = seq;
    note("training.seq_len", "training.seq_len", seq);
    if (const auto* g = in.take("training.global_batch_size")) {
      const auto gb = in.as<std::int64_t>("training.global_batch_size", *g, "an integer");
      if (gb != -1 && gb != rows * data_ranks)
        ignore("training.global_batch_size", *g,
               fmt::format("gradient accumulation is not modelled: one step of local_batch_size "
                           "× {} data-parallel ranks = {} rows",
                           data_ranks, rows * data_ranks));
    }
    if (const auto* mp = in.take("training.mixed_precision_param"))
      if (mp->value<std::string>().value_or("") != "bfloat16")
        ignore("training.mixed_precision_param", *mp, "the twin models bf16 parameters");
    checkpointing(t);
    std::string from = "compile.enable";
    const auto compiled = boolean({"compile.enable", "training.compile"}, &from).value_or(false);
    t["compile"] = compiled;
    note(from, "training.compile", compiled);
    if (const auto* opt = in.take("optimizer.name")) {
      if (opt->value<std::string>().value_or("") != "AdamW")
        ignore("optimizer.name", *opt, "modelled as AdamW on the GPU");
      else
        note("optimizer.name", "training.optimizer", "adamw");
    }
    float8(t);
    // TorchTitan's defaults where the twin's (the EUROPA job's) differ: AdamW on the GPU, no
    // activation offload.
    t["optimizer"] = "adamw";
    t["cpu_offload"] = false;
    t["offload_fraction"] = 0;
    // FSDP2 as TorchTitan applies it: every block resharded after forward to the whole shard
    // group, its all-gather buffers from FSDP's own stream's pool; run_train.sh sets
    // PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.
    t["dense_reshard"] = "global";
    t["unshard_async_op"] = false;
    t["expandable_segments"] = true;
    t["loss_chunk_tokens"] = 0;  // cross_entropy over the whole batch's fp32 logits
    s["training"] = t;
  }

  // The plan: shard × replicate × tensor = the machine's GPUs (shard −1: the rest); the async
  // TP switch and FSDP's reshard mode.
  void parallel(int nodes, int gpn) {
    const std::int64_t gpus = static_cast<std::int64_t>(nodes) * gpn;
    for (const char* k :
         {"parallelism.pipeline_parallel_degree", "parallelism.context_parallel_degree",
          "training.pipeline_parallel_degree", "training.context_parallel_degree"})
      if (const auto* n = in.take(k); n && in.as<std::int64_t>(k, *n, "an integer") > 1)
        throw InputError(in.file(), k,
                         "pipeline and context parallelism are not modelled (degree must be 1)");
    const auto dp = integer(
        {"parallelism.data_parallel_replicate_degree", "training.data_parallel_replicate_degree"},
        1);
    const auto tp =
        integer({"parallelism.tensor_parallel_degree", "training.tensor_parallel_degree"}, 1);
    const auto ep = integer({"parallelism.expert_parallel_degree"}, 1);
    auto shard = integer(
        {"parallelism.data_parallel_shard_degree", "training.data_parallel_shard_degree"}, -1);
    if (shard == -1) shard = gpus / std::max<std::int64_t>(1, dp * tp);
    if (shard < 1 || shard * dp * tp != gpus)
      throw InputError(
          in.file(), "parallelism.data_parallel_shard_degree",
          fmt::format("shard {} × replicate {} × tensor {} must equal the {} GPUs of {} nodes × {}",
                      shard, dp, tp, gpus, nodes, gpn));
    s["parallel"] = {{"replica_gpus", shard * tp}, {"ep", ep}, {"dp", dp}, {"tp", tp}};
    note("parallelism.*_degree", "parallel", s["parallel"]);
    training(shard * dp);
    ep_dispatch(ep);
    std::string from = "parallelism.enable_async_tensor_parallel";
    if (const auto async = boolean({"parallelism.enable_async_tensor_parallel",
                                    "experimental.enable_async_tensor_parallel"},
                                   &from)) {
      s["training"]["async_tp"] = *async && tp > 1;
      note(from, "training.async_tp", *async && tp > 1);
    }
    if (const auto* r = in.take("parallelism.fsdp_reshard_after_forward"))
      if (r->value<std::string>().value_or("default") == "never")
        ignore("parallelism.fsdp_reshard_after_forward", *r, "the twin reshards after forward");
  }

  // TorchTitan's EP token exchange: its standard all_to_all_single sends a token once per routed
  // expert; DeepEP and HybridEP once per EP rank (model/workload.hpp ep_copies_per_token).
  // Without expert parallelism there is no exchange.
  void ep_dispatch(std::int64_t ep) {
    const char* k = "parallelism.expert_parallel_comm_backend";
    std::string backend = "standard";
    const auto* n = in.take(k);
    if (n && ep <= 1) out.no_effect.push_back(k);
    if (ep <= 1) return;
    if (n) backend = in.as<std::string>(k, *n, "a string");
    if (backend != "standard" && backend != "deepep" && backend != "hybridep")
      throw InputError(in.file(), k, "expected standard, deepep or hybridep");
    const std::string mode = backend == "standard" ? "pairs" : "per_rank";
    s["training"]["ep_dispatch"] = mode;
    note(k, "training.ep_dispatch", mode);
  }

  // The keys left: without effect on one step, or not modelled.
  void rest() {
    for (const auto& [k, n] : in.rest()) {
      bool no_effect = false;
      for (const char* p : kNoEffectPrefixes) no_effect = no_effect || k.rfind(p, 0) == 0;
      if (no_effect)
        out.no_effect.push_back(k);
      else
        ignore(k, *n, "not modelled");
    }
  }
};

}  // namespace

ImportedJob import_torchtitan(const std::string& toml_file, const TorchtitanMachine& machine,
                              int profile_gpus_per_node) {
  toml::table tbl;
  try {
    tbl = toml::parse_file(toml_file);
  } catch (const toml::parse_error& e) {
    throw InputError(toml_file, "",
                     fmt::format("TOML syntax, line {}, column {}: {}", e.source().begin.line,
                                 e.source().begin.column, e.description()));
  }
  std::map<std::string, const toml::node*> keys;
  flatten(tbl, "", keys);
  Reader in(toml_file, std::move(keys));
  ImportedJob out;
  Json& s = out.scenario;
  Mapper m{in, out, s};
  const std::string stem = std::filesystem::path(toml_file).stem().string();
  s["name"] = stem;
  const auto* desc = in.take("job.description");
  s["description"] =
      fmt::format("Imported from {} by twin import-torchtitan{}",
                  std::filesystem::path(toml_file).filename().string(),
                  desc ? ": " + desc->value<std::string>().value_or("") : std::string());
  m.model();
  const int gpn = machine.gpus_per_node > 0 ? machine.gpus_per_node : profile_gpus_per_node;
  s["hardware"] = {{"profile", machine.profile}};
  if (gpn != profile_gpus_per_node)
    s["hardware"]["node"] = {{"gpus", {{"value", gpn}, {"source", "[import] --gpus-per-node"}}}};
  m.parallel(machine.nodes, gpn);
  // SDPA with a causal mask over each whole row (TorchTitan's Llama 3 default).
  s["data"] = {{"document_masking", false}};
  s["nccl"] = {{"max_ctas", 0}};
  m.rest();
  return out;
}

}  // namespace twin::scenarios
