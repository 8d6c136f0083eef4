// Shared by the calibration tests: the source tree, a profile's contention section, and what
// the contention files record of nvjet's launches.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "hardware/contention.hpp"
#include "hardware/kernel_shapes.hpp"
#include "hardware/nvjet_name.hpp"

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
  const auto lone = [&j](const char* key) {
    return j.contains(key) ? j[key]["value"].get<double>() : 0.0;
  };
  m.lone_cta.setup_us = lone("lone_cta_setup_us");
  m.lone_cta.stream_GBps = lone("lone_cta_stream_GBps");
  m.lone_cta.TMACps = lone("lone_cta_TMACps");
  if (j.contains("lone_cta_tiles")) {
    const auto& t = j["lone_cta_tiles"];
    const auto table = [&t](const char* key) { return t[key]["value"].get<std::vector<double>>(); };
    m.lone_cta.tile_m = table("tile_m"), m.lone_cta.tile_n = table("tile_n");
    m.lone_cta.tile_cluster_m = table("cluster_m"), m.lone_cta.tile_cluster_n = table("cluster_n");
    m.lone_cta.tile_setup_us = table("setup_us"), m.lone_cta.tile_per_k_ns = table("per_k_ns");
  }
  m.split_k_reduce = {lone("split_k_reduce_setup_us"), lone("split_k_reduce_GBps"),
                      lone("split_k_reduce_lone_block"), lone("split_k_reduce_fixed_us")};
  m.prepare();
  return m;
}

// The longest of a case's launch records, `time` giving a record's duration.
template <class Time>
const nlohmann::json& longest(const nlohmann::json& launches, Time time) {
  const nlohmann::json* big = nullptr;
  for (const auto& l : launches)
    if (!big || time(l) > time(*big)) big = &l;
  REQUIRE(big);
  return *big;
}

// nvjet's tile and cluster from its kernel name
// (nvjet_sm90_tst_<tile_m>x<tile_n>_<k tile>x<stages>_<cluster x>x<cluster y>_…).
inline hardware::GemmLaunch nvjet_name_launch(const std::string& kernel) {
  hardware::GemmLaunch l;
  REQUIRE_NOTHROW(l = hardware::nvjet_named_launch(kernel, {}, 1, 1, 132));
  return l;
}
// The CTAs of a launch record: the product of its grid.
inline double ctas_of(const nlohmann::json& launch) {
  double ctas = 1;
  for (const auto& g : launch["grid"]) ctas *= g.get<double>();
  return ctas;
}

}  // namespace twin::test
