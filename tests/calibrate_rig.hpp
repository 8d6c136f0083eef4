// Shared by the calibration tests: the source tree and a profile's contention section.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "hardware/contention.hpp"

namespace twin::test {

inline const std::filesystem::path kRoot(TWIN_SOURCE_DIR);

// The `contention` section of a profile, read the way the loader does (value per key).
inline hardware::ContentionModel profile_model(const std::string& name) {
  std::ifstream in(kRoot / "hardware/profiles" / (name + ".json"));
  const auto j = nlohmann::json::parse(in)["contention"];
  hardware::ContentionModel m;
  m.cluster_held_sms = j["clusters"]["held_sms"]["value"].get<std::vector<double>>();
  m.gpcs = j["clusters"]["gpcs"]["value"];
  for (int t = 0; t < 4; ++t)
    m.cluster_usable_sms[t] =
        j["clusters"]["c" + std::to_string(hardware::ContentionModel::kClusterSizes[t]) +
                      "_usable_sms"]["value"]
            .get<std::vector<double>>();
  for (int i = 0; i < hardware::kFamilies; ++i) {
    auto& p = m.family[i];
    const auto& f = j[std::string(hardware::family_name(static_cast<hardware::Family>(i)))];
    const auto set = [&f](const char* key, auto& v) {
      if (f.contains(key)) v = f[key]["value"];
    };
    set("boost_max", p.boost_max), set("cluster_sms", p.cluster_sms), set("fixed_us", p.fixed_us);
    set("sat_sms", p.sat_sms), set("knee", p.knee), set("lone_block", p.lone_block),
        set("gpc_queue", p.gpc_queue);
    set("block_threads", p.block.threads), set("block_registers", p.block.registers);
    set("block_smem_bytes", p.block.smem_bytes);
  }
  m.prepare();
  return m;
}

}  // namespace twin::test
