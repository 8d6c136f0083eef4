#include "scenarios/loader.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "model/architecture.hpp"
#include "scenarios/json_tree.hpp"
#include "scenarios/side_files.hpp"

#ifndef TWIN_DATA_DIR
#define TWIN_DATA_DIR "."
#endif

namespace twin::scenarios {

namespace fs = std::filesystem;

InputError::InputError(std::string file_, std::string path_, std::string msg)
    : std::runtime_error(
          fmt::format("{}: {}{}", file_, path_.empty() ? "" : "$." + path_ + ": ", msg)),
      file(std::move(file_)),
      path(std::move(path_)),
      message(std::move(msg)) {}

fs::path default_data_dir() {
  if (const char* env = std::getenv("TWIN_DATA_DIR"); env && *env) return env;
  return TWIN_DATA_DIR;
}

Json read_json_file(const fs::path& file) {
  std::error_code ec;
  if (fs::exists(file, ec) && !fs::is_regular_file(file, ec))
    throw InputError(file.string(), "", "not a regular file");
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw InputError(file.string(), "", fmt::format("cannot open: {}", std::strerror(errno)));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw InputError(file.string(), "", "cannot read the file");
  const std::string text = ss.str();
  if (const auto why = json_text_problem(text); !why.empty())
    throw InputError(file.string(), "", why);
  try {
    Json j = Json::parse(text);
    if (!j.is_object()) throw InputError(file.string(), "", "expected a JSON object at the top");
    return j;
  } catch (const Json::parse_error& e) {
    std::size_t line = 1, col = 1;
    for (std::size_t i = 0; i + 1 < e.byte && i < text.size(); ++i, ++col)
      if (text[i] == '\n') ++line, col = 0;
    throw InputError(file.string(), "",
                     fmt::format("invalid JSON at line {} column {}", line, col));
  } catch (const Json::exception& e) {
    // e.g. a number too large for a double (found by fuzzing: tests/data/fuzz/).
    throw InputError(file.string(), "", fmt::format("invalid JSON: {}", e.what()));
  }
}

namespace {

constexpr const char* kSetOrigin = "--set";
// Free-form records of measured profiles, kept and echoed to outputs, never interpreted.
constexpr const char* kProvenanceKey = "hardware.provenance";
constexpr const char* kMeasurementsKey = "hardware.measurements";

using Entry = sim::Schema<Scenario>::Entry;

class Resolver {
 public:
  Resolver(const fs::path& file, const LoadOptions& opts) : top_(file.string()), opts_(opts) {
    for (const auto& e : scenario_schema().entries()) {
      keys_.push_back(e.spec.key);
      for (auto p = e.spec.key.rfind('.'); p != std::string::npos;
           p = e.spec.key.rfind('.', p - 1)) {
        prefixes_.insert(e.spec.key.substr(0, p));
        if (p == 0) break;
      }
    }
  }

  Loaded run() {
    std::vector<std::string> chain;
    load_chain(top_, chain);
    const auto sets = parse_sets();
    for (const auto& [k, v] : sets)
      if (k == "model.preset" || k == "hardware.profile") apply_set(k, v);
    resolve_ref("model", "preset", "scenarios/models");
    resolve_ref("hardware", "profile", "hardware/profiles");
    for (const auto& [k, v] : sets)
      if (k != "model.preset" && k != "hardware.profile") apply_set(k, v);
    check_unknown(tree_, "");
    Loaded out;
    for (const auto& e : scenario_schema().entries()) bind(e, out.scenario);
    if (const Json* p = find_path(tree_, kProvenanceKey))
      out.scenario.hw.provenance_json = p->dump();
    hardware::finish_contention(out.scenario.hw);
    hardware::finish_power(out.scenario.hw);
    check_cross_fields(out.scenario);
    load_doc_lengths(out.scenario.job.data);
    load_node_list(out.scenario);
    out.resolved = tree_;
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& key, const std::string& msg) const {
    throw InputError(origins_.of(key, top_), key, msg);
  }

  void load_chain(const fs::path& file, std::vector<std::string>& stack) {
    std::error_code ec;
    const auto canon = fs::weakly_canonical(file, ec).string();
    for (auto s = stack.begin(); s != stack.end(); ++s)
      if (*s == canon) {
        std::string chain;
        for (auto t = s; t != stack.end(); ++t) chain += fs::path(*t).filename().string() + " → ";
        throw InputError(file.string(), "base",
                         "base-scenario cycle: " + chain + file.filename().string());
      }
    stack.push_back(canon);
    Json j = read_json_file(file);
    if (auto it = j.find("base"); it != j.end()) {
      if (!it->is_string() || it->get<std::string>().empty())
        throw InputError(file.string(), "base", "expected a file name (string)");
      load_chain(file.parent_path() / it->get<std::string>(), stack);
      j.erase("base");
    }
    deep_merge(tree_, j, "", file.string(), origins_);
  }

  std::vector<std::pair<std::string, Json>> parse_sets() const {
    std::vector<std::pair<std::string, Json>> out;
    for (const auto& s : opts_.sets) {
      const auto eq = s.find('=');
      if (eq == std::string::npos || eq == 0)
        throw InputError(kSetOrigin, "", fmt::format("\"{}\": expected KEY=VALUE", s));
      const std::string key = s.substr(0, eq), text = s.substr(eq + 1);
      if (!valid_utf8(s)) throw InputError(kSetOrigin, "", "a --set that is not UTF-8");
      if (std::find(keys_.begin(), keys_.end(), key) == keys_.end()) {
        const auto near = closest_key(key, keys_);
        throw InputError(kSetOrigin, key,
                         "no such parameter" +
                             (near.empty() ? "" : " (did you mean " + near + "?)") +
                             "; `twin help-params` lists them");
      }
      if (const auto why = json_text_problem(text); !why.empty())
        throw InputError(kSetOrigin, key, why);
      Json v = Json::parse(text, nullptr, false);
      if (v.is_discarded()) v = text;  // a bare word is a string
      out.emplace_back(key, std::move(v));
    }
    return out;
  }

  const Entry& entry(const std::string& key) const {
    for (const auto& e : scenario_schema().entries())
      if (e.spec.key == key) return e;
    throw std::logic_error("no entry " + key);
  }

  void apply_set(const std::string& key, const Json& v) {
    Json& slot = make_path(tree_, key);
    slot =
        entry(key).spec.sourced ? Json{{"value", v}, {"source", "--set on the command line"}} : v;
    origins_.record_tree(slot, key, kSetOrigin);
  }

  void resolve_ref(const std::string& section, const std::string& ref, const std::string& dir) {
    const std::string key = section + "." + ref;
    const Json* name = find_path(tree_, key);
    if (!name) return;
    if (!name->is_string()) fail(key, "expected a string (a preset name or a file path)");
    const std::string n = name->get<std::string>();
    if (n.empty()) return;
    const bool is_path = n.find('/') != std::string::npos || n.ends_with(".json");
    const fs::path file = is_path ? fs::path(origins_.of(key, top_)).parent_path() / n
                                  : opts_.data_dir / dir / (n + ".json");
    if (!is_path && !fs::exists(file))
      fail(key, fmt::format("no {} named \"{}\" (looked for {})", section, n, file.string()));
    Json merged = read_preset(file, key, ref, 0);
    const Json preset = merged;
    Origins scratch;
    Json own = tree_[section];
    own.erase(ref);
    deep_merge(merged, own, section, "", scratch);
    merged[ref] = n;
    record_preset_origins(preset, &own, section, file.string());
    origins_.record(section, file.string());  // keys missing from the section: blame the preset
    tree_[section] = merged;
  }

  // A preset file may name a `base` preset (in its own folder) and override parts of it, as
  // twin-calibrate's measured profiles do.
  Json read_preset(const fs::path& file, const std::string& key, const std::string& ref,
                   int depth) {
    Json j = read_json_file(file);
    if (j.contains(ref))
      throw InputError(file.string(), key, "a preset file cannot name another preset");
    if (!j.contains("base")) return j;
    if (!j["base"].is_string()) throw InputError(file.string(), "base", "expected a preset name");
    if (depth > 8)
      throw InputError(file.string(), "base", "preset bases nested too deep (a cycle?)");
    const fs::path base = file.parent_path() / (j["base"].get<std::string>() + ".json");
    Json merged = read_preset(base, key, ref, depth + 1);
    j.erase("base");
    Origins scratch;
    deep_merge(merged, j, "", "", scratch);
    return merged;
  }

  // Values that came from the preset file (not overridden by the scenario) name that file.
  void record_preset_origins(const Json& preset, const Json* own, const std::string& path,
                             const std::string& file) {
    if (!own) origins_.record(path, file);
    if (!preset.is_object()) return;
    for (const auto& [k, v] : preset.items()) {
      const Json* o = own && own->is_object() && own->contains(k) ? &(*own)[k] : nullptr;
      record_preset_origins(v, o, join_path(path, k), file);
    }
  }

  // A model or a hardware file given where a scenario is expected: its keys are unknown at a
  // scenario's top level, and the message says what the file is and how a scenario names it.
  std::string not_a_scenario() const {
    if (tree_.contains("layers") && tree_.contains("hidden"))
      return "; this is a model file (scenarios/models/): a scenario names one with "
             "{\"model\": {\"preset\": \"NAME\"}}";
    if (tree_.contains("gpu") && tree_.contains("node"))
      return "; this is a hardware profile (hardware/profiles/): a scenario names one with "
             "{\"hardware\": {\"profile\": \"NAME\"}}";
    return "";
  }

  void check_unknown(const Json& node, const std::string& path) {
    if (!path.empty() && std::find(keys_.begin(), keys_.end(), path) != keys_.end()) return;
    if (path == kProvenanceKey || path == kMeasurementsKey) return;
    const bool is_prefix = path.empty() || prefixes_.count(path);
    if (!is_prefix) {
      const auto near = closest_key(path, keys_);
      fail(path, "unknown key" + (near.empty() ? "" : " (did you mean " + near + "?)") +
                     (path.find('.') == std::string::npos ? not_a_scenario() : ""));
    }
    if (!node.is_object()) fail(path, "expected an object");
    for (const auto& [k, v] : node.items()) {
      // A dotted name is a --set path, not a key: it would match nothing (issue #23, item 4).
      const std::string key = join_path(path, k);
      if (k.find('.') != std::string::npos)
        fail(key, "a key cannot contain a dot: nest the objects, or use --set " + key + "=…");
      check_unknown(v, key);
    }
  }

  void bind(const Entry& e, Scenario& s) {
    const auto& spec = e.spec;
    const Json* node = find_path(tree_, spec.key);
    if (!node) {
      if (!spec.default_value)
        fail(spec.key, fmt::format("missing key (expected {}{}: {})", sim::type_name(spec.type),
                                   spec.unit.empty() ? "" : " in " + spec.unit, spec.help));
      e.set(s, *spec.default_value);
      Json dv = Json::parse(sim::format_value(*spec.default_value));
      make_path(tree_, spec.key) = spec.sourced ? Json{{"value", dv}, {"source", "default"}} : dv;
      return;
    }
    const Json* v = node;
    if (spec.sourced) {
      if (!node->is_object() || node->size() != 2 || !node->contains("value") ||
          !node->contains("source") || !(*node)["source"].is_string())
        fail(spec.key, "expected {\"value\": ..., \"source\": \"where the number comes from\"}");
      v = &(*node)["value"];
      s.hw.sources[spec.key.substr(spec.key.find('.') + 1)] = (*node)["source"].get<std::string>();
    }
    e.set(s, convert(spec, *v));
  }

  sim::ParamValue convert(const sim::ParamSpec& spec, const Json& v) const {
    const auto expect = [&](const char* what) {
      fail(spec.key, fmt::format("expected {}, got {}", what, v.dump()));
    };
    switch (spec.type) {
      case sim::ParamType::boolean:
        if (!v.is_boolean()) expect("true or false");
        return v.get<bool>();
      case sim::ParamType::integer: {
        if (!v.is_number_integer()) expect("an integer");
        const auto i = v.get<std::int64_t>();
        check_range(spec, static_cast<double>(i), v);
        return i;
      }
      case sim::ParamType::real: {
        if (!v.is_number()) expect("a number");
        const double d = v.get<double>();
        check_range(spec, d, v);
        return d;
      }
      case sim::ParamType::text:
        if (!v.is_string()) expect("a string");
        return v.get<std::string>();
      case sim::ParamType::reals: {
        if (!v.is_array() || v.empty()) expect("a list of numbers");
        std::vector<double> out;
        for (const auto& x : v) {
          if (!x.is_number()) expect("a list of numbers");
          out.push_back(x.get<double>());
          check_range(spec, out.back(), x);
        }
        return out;
      }
      case sim::ParamType::choice: {
        if (!v.is_string()) expect("a string");
        const auto c = v.get<std::string>();
        if (std::find(spec.choices.begin(), spec.choices.end(), c) == spec.choices.end())
          fail(spec.key, fmt::format("\"{}\" is not one of: {}", c, fmt::join(spec.choices, ", ")));
        return c;
      }
    }
    return {};
  }

  void check_range(const sim::ParamSpec& spec, double d, const Json& v) const {
    if (!(d >= spec.min && d <= spec.max) || !std::isfinite(d))
      fail(spec.key, fmt::format("{} is out of range [{}, {}]{}", v.dump(), spec.min, spec.max,
                                 spec.unit.empty() ? "" : " " + spec.unit));
  }

  void check_cross_fields(const Scenario& s) {
    try {
      scenarios::check_cross_fields(s);
    } catch (const sim::ParamError& e) {
      fail(blamed(e.key, e.also), e.what());
    }
  }

  // Of keys in conflict, the one set most specifically: on the command line, then in the
  // scenario file, then in a base scenario or preset (`--set parallel.ep=7` is the --set's fault,
  // not the model preset's); the first named where they tie.
  std::string blamed(const std::string& key, const std::vector<std::string>& also) const {
    const auto rank = [&](const std::string& k) {
      const auto o = origins_.of(k, top_);
      return o == kSetOrigin ? 2 : o == top_ ? 1 : 0;
    };
    std::string best = key;
    for (const auto& k : also)
      if (rank(k) > rank(best)) best = k;
    return best;
  }

  // A file named by scenario key `key`, relative to the scenario file that set it.
  fs::path side_file(const std::string& key, const std::string& name, std::ifstream& in) {
    const fs::path file = fs::path(origins_.of(key, top_)).parent_path() / name;
    std::error_code ec;
    if (fs::exists(file, ec) && !fs::is_regular_file(file, ec))
      fail(key, fmt::format("{} is not a regular file", file.string()));
    in.open(file);
    if (!in) fail(key, fmt::format("cannot open {}: {}", file.string(), std::strerror(errno)));
    return file;
  }

  void load_doc_lengths(model::DataOptions& d) {
    if (d.doc_lengths_file.empty()) return;
    std::ifstream in;
    const fs::path file = side_file("data.doc_lengths_file", d.doc_lengths_file, in);
    d.doc_lengths = read_doc_lengths(in, file.string());
  }

  // The Slurm node list of placement.policy "file": names checked against the machine here, so a
  // bad list is an input error naming the file.
  void load_node_list(Scenario& s) {
    auto& p = s.placement;
    const std::string key = "placement.node_list_file";
    if (p.policy != hardware::PlacementPolicy::file) return;
    if (p.node_list_file.empty()) fail(key, "placement.policy \"file\" needs a node list file");
    std::ifstream in;
    const fs::path file = side_file(key, p.node_list_file, in);
    p.node_names = read_node_list(in, file.string(),
                                  static_cast<int>(s.job.parallel.total_gpus() / s.hw.node.gpus), p,
                                  s.hw.network);
  }

  std::string top_;
  const LoadOptions& opts_;
  Json tree_ = Json::object();
  Origins origins_;
  std::vector<std::string> keys_;
  std::set<std::string> prefixes_;
};

}  // namespace

Loaded load_scenario(const fs::path& file, const LoadOptions& opts) {
  return Resolver(file, opts).run();
}

}  // namespace twin::scenarios
