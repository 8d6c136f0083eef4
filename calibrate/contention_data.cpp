#include "calibrate/contention_data.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

#include "calibrate/launch_records.hpp"
#include "hardware/kernel_shapes.hpp"
#include "hardware/nvjet_name.hpp"

namespace twin::calibrate {

using hardware::Family;
using hardware::KernelShape;
using hardware::Schedule;
using Json = nlohmann::json;

hardware::GemmLaunch nvjet_launch(const Json& l, const hardware::GemmDims& d, double batch) {
  try {
    return hardware::nvjet_named_launch(l.value("name", ""), d, batch, product(l["grid"]), kSms);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
}

namespace {

hardware::BlockResources block_of(const Json& l) {
  return {static_cast<int>(product(l["block"])), l.value("registers", 0), l.value("smem_bytes", 0)};
}

// o from the launch's threads, registers and shared memory; h beside the file's holder.
KernelShape grid_shape(Family f, const Json* l, const hardware::BlockResources& holder) {
  if (!l) throw std::runtime_error("an elementwise case without launch records");
  const auto b = block_of(*l);
  KernelShape s{f, Schedule::grid,
                static_cast<std::uint16_t>(std::max(1, hardware::blocks_beside(b))),
                static_cast<float>(product((*l)["grid"]))};
  s.beside = static_cast<std::int8_t>(hardware::blocks_beside(b, holder));
  return s;
}

// The registers of kernels/sm_hold.cu's holder builds (ptxas -v, sm_90): the light one (mode 0)
// 16, the NCCL-like ones (modes 1, 2) 96; an NCCL CTA as JOB.md §8 gives it.
constexpr int kLightHolderRegisters = 16, kNcclHolderRegisters = 96;
constexpr hardware::BlockResources kNcclCtaHolder{640, kNcclHolderRegisters, 80 * 1024};

// What held the SMs in a file: `holder_resources`; else `holder_shape` ([shared memory,
// threads, mode] or "nccl_cta"); else the words of `provenance.holder` ("…, 640 threads x 96
// registers, 80 KiB shared memory"; without registers, the light build).
hardware::BlockResources holder_of(const Json& file, const std::string& name) {
  if (file.contains("holder_resources")) {
    const auto& h = file["holder_resources"];
    return {h.value("threads", 0), h.value("registers", 0), h.value("smem_bytes", 0)};
  }
  if (file.contains("holder_shape")) {
    const auto& h = file["holder_shape"];
    if (h.is_string() && h == "nccl_cta") return kNcclCtaHolder;
    if (!h.is_array() || h.size() != 3)
      throw std::runtime_error(
          name + ": holder_shape: expected [shared memory, threads, mode] or \"nccl_cta\"");
    return {h[1].get<int>(), h[2].get<int>() == 0 ? kLightHolderRegisters : kNcclHolderRegisters,
            h[0].get<int>()};
  }
  const std::string text = file.value("provenance", Json::object()).value("holder", "");
  auto number_before = [&](const std::string& word) {
    const auto at = text.find(" " + word);
    if (at == std::string::npos) return -1;
    auto from = at;
    while (from > 0 && std::isdigit(static_cast<unsigned char>(text[from - 1]))) --from;
    return from == at ? -1 : std::stoi(text.substr(from, at - from));
  };
  const int threads = number_before("threads"), registers = number_before("registers"),
            smem_KiB = number_before("KiB shared memory");
  if (threads <= 0 || smem_KiB < 0)
    throw std::runtime_error(
        name + ": provenance.holder: expected \"N threads\" and \"N KiB shared memory\"");
  return {threads, registers > 0 ? registers : kLightHolderRegisters, smem_KiB * 1024};
}

// The twin's cuBLAS shapes (kernel_shapes.hpp: tiles and CTAs as nvjet chooses them).
KernelShape gemm_case_shape(const Json& shape) {
  return hardware::gemm_shape(kSms, shape.value("m", 1792.0), shape.value("n", 6144.0),
                              shape.value("k", 1792.0), shape.value("batch", 1.0));
}

// Elementwise kernels of the bench → the family of their implementation.
const std::map<std::string, Family>& elementwise_families() {
  static const std::map<std::string, Family> m = {{"add", Family::ew_add},
                                                  {"mul", Family::ew_add},
                                                  {"rmsnorm_fwd", Family::ew_norm},
                                                  {"rmsnorm_bwd", Family::ew_norm_bwd},
                                                  {"swiglu_fwd", Family::ew_swiglu},
                                                  {"swiglu_bwd", Family::ew_swiglu_bwd},
                                                  {"permute_gather", Family::ew_gather},
                                                  {"unpermute_index_add", Family::ew_scatter_add},
                                                  {"fp32_accumulate_bf16", Family::ew_widen},
                                                  {"cast_bf16_fp32", Family::ew_widen},
                                                  {"copy_strided", Family::ew_widen},
                                                  {"fp8_block_quantize", Family::ew_fp8_quant},
                                                  {"fp8_block_dequantize", Family::ew_fp8_dequant},
                                                  {"bf16_sum_fp32", Family::ew_sum_fp32},
                                                  {"cross_entropy_fwd", Family::ew_loss},
                                                  {"cross_entropy_bwd", Family::ew_loss_bwd}};
  return m;
}

// Newton–Schulz's launches (one call's profiler records): its GEMMs (kernel_shapes.hpp:
// newton_schulz_gemms, in launch order) as nvjet launched them, its elementwise kernels as
// PyTorch did, each with its measured time. (The twin's own cuBLAS launch choice, gemm_launch,
// does not reproduce these three; the contention of a launch is what is fitted here.)
std::vector<hardware::KernelPart> newton_schulz_parts(const Json& c,
                                                      const hardware::BlockResources& holder) {
  const Json& shape = c["shape"];
  const auto gemms = hardware::newton_schulz_gemms(shape.value("m", 0.0), shape.value("n", 0.0));
  std::vector<hardware::KernelPart> parts;
  std::size_t g = 0;
  for (const auto& l : c["launches"]) {
    if (!l.contains("grid") || !l.contains("dur_us")) continue;
    const double t = l["dur_us"].get<double>() * 1e-6;
    if (l.value("name", "").rfind("nvjet", 0) == 0) {
      const auto& d = gemms[g++ % gemms.size()];
      parts.push_back({hardware::gemm_shape(nvjet_launch(l, d, shape.value("batch", 1.0))), t});
    } else {
      parts.push_back({grid_shape(Family::ew_add, &l, holder), t});
    }
  }
  if (parts.empty()) throw std::runtime_error("a Newton–Schulz case without launch records");
  return parts;
}

// group name and shape of one measured case; group "" = not modelled (reported as measured).
std::pair<std::string, KernelShape> classify(const Json& c,
                                             const hardware::BlockResources& holder = {}) {
  const std::string cls = c["class"], kernel = c["kernel"];
  const Json* l = major_launch(c);
  if (cls == "elementwise") {
    const auto it = elementwise_families().find(kernel);
    if (it == elementwise_families().end()) return {"", {}};
    return {std::string(hardware::family_name(it->second)), grid_shape(it->second, l, holder)};
  }
  if (cls == "gemm" || cls == "newton_schulz") return {"gemm", gemm_case_shape(c["shape"])};
  if (cls == "gemm_fp8")
    return {"gemm_fp8",
            hardware::gemm_fp8_shape(kSms, c["shape"].value("m", 0.0), c["shape"].value("n", 0.0))};
  if (cls == "attention" && (kernel.rfind("sdpa", 0) == 0 || kernel.rfind("flex", 0) == 0))
    return kernel.find("_bwd") != std::string::npos
               ? std::pair{std::string("attention_bwd"), hardware::attention_shape(kSms, true)}
               : std::pair{std::string("attention"), hardware::attention_shape(kSms, false)};
  if (cls == "grouped_gemm") {
    const bool dyn = kernel.find("dynamic") != std::string::npos;
    const KernelShape s{Family::grouped_gemm,
                        dyn ? Schedule::persistent_dynamic : Schedule::persistent_static, 1, kSms};
    return {kernel.rfind("twin_", 0) == 0 ? "twin_grouped" : "grouped_gemm", s};
  }
  return {"", {}};
}

std::string case_name(const Json& c) {
  std::string s = c["kernel"].get<std::string>() + "[";
  bool first = true;
  for (const auto& [k, v] : c["shape"].items())
    s += (first ? "" : ",") + k + "=" + v.dump(), first = false;
  return s + "]";
}

}  // namespace

std::vector<ContentionCase> read_contention_cases(const std::vector<std::string>& files) {
  std::map<std::string, std::vector<ContentionCase>> by_class;  // a later file's class replaces
  for (const auto& f : files) {
    const Json j = read_measurement(f);
    if (!j.contains("cases") || !j.contains("held_sms"))
      throw std::runtime_error(f + ": expected a contention_bench.py result (cases, held_sms)");
    const auto holder = holder_of(j, f);
    std::vector<int> held = j["held_sms"].get<std::vector<int>>();
    std::set<int> fit_k;
    for (std::size_t i = 1; i < held.size(); i += 2) fit_k.insert(held[i]);
    std::map<std::string, std::vector<ContentionCase>> here;
    std::map<std::string, int> index;  // per group: alternate cases between fit and hold-out
    for (const auto& c : j["cases"]) {
      auto [group, shape] = classify(c, holder);
      ContentionCase cc{case_name(c),
                        group.empty() ? c["class"].get<std::string>() + ":unmodelled" : group,
                        shape,
                        {}};
      if (const Json* l = major_launch(c); l && l->contains("block")) cc.block = block_of(*l);
      if (c["class"] == "newton_schulz") cc.parts = newton_schulz_parts(c, holder);
      cc.bytes = c.value("bytes", 0.0);
      cc.alone_s = c.value("alone_ms", 0.0) * 1e-3;
      const double copy_GBps =
          j.contains("copy_engine_check") ? j["copy_engine_check"].value("alone_GBps", 0.0) : 0.0;
      if (copy_GBps > 0 && cc.bytes > 0)
        cc.copy_share = cc.bytes / (c["alone_ms"].get<double>() * 1e-3) / (copy_GBps * 1e9);
      const bool fit_case = !group.empty() && index[group]++ % 2 == 0;
      double most = 0;
      for (const auto& p : c["points"]) {
        // Blocked: the kernel could not start beside the holders (a cluster found no GPC with
        // room) and ran after they gave up — recorded as such since the holder reports time-outs;
        // before, seen as a slowdown that collapses while more SMs are held (no kernel gets 40%
        // faster with fewer SMs).
        if (!p.contains("slowdown")) continue;
        const double y = p["slowdown"].get<double>();
        most = std::max(most, y);
        if (y < 0.6 * most) continue;
        const int k = p["held_sms"];
        cc.points.push_back({k, y, fit_case && fit_k.count(k) > 0});
      }
      here[c["class"].get<std::string>()].push_back(std::move(cc));
    }
    for (auto& [cls, v] : here) by_class[cls] = std::move(v);
  }
  std::vector<ContentionCase> out;
  for (auto& [cls, v] : by_class)
    for (auto& c : v) out.push_back(std::move(c));
  return out;
}

void read_cluster_tables(const std::string& file, hardware::ContentionModel& m) {
  const Json j = read_measurement(file);
  if (!j.contains("held_sms") || !j.contains("clusters"))
    throw std::runtime_error(file + ": expected a cluster_probe.py result (held_sms, clusters)");
  m.cluster_held_sms = j["held_sms"].get<std::vector<double>>();
  for (int t = 0; t < 4; ++t) {
    const auto size = std::to_string(hardware::ContentionModel::kClusterSizes[t]);
    if (!j["clusters"].contains(size))
      throw std::runtime_error(file + ": clusters." + size + " missing");
    std::map<double, double> at;
    for (const auto& r : j["clusters"][size]) {
      if (!r.contains("resident_ctas")) continue;  // blocked: 0
      auto v = r["resident_ctas"].get<std::vector<double>>();
      std::sort(v.begin(), v.end());
      at[r["held_sms"].get<double>()] = v[v.size() / 2];
    }
    auto& u = m.cluster_usable_sms[t];
    u.clear();
    for (const double k : m.cluster_held_sms) u.push_back(at.count(k) ? at[k] : 0.0);
  }
}

namespace {
// A case's clock alone and its median clock with 56–112 SMs held (0, 0 without readings).
std::pair<double, double> clocks_of(const Json& c) {
  double alone = 0;
  std::vector<double> plateau;
  for (const auto& p : c["points"]) {
    if (!p.contains("sm_clock_MHz") || !p["sm_clock_MHz"].is_number()) continue;
    const int k = p["held_sms"];
    const double mhz = p["sm_clock_MHz"];
    if (k == 0) alone = mhz;
    if (k >= 56 && k <= 112) plateau.push_back(mhz);
  }
  if (alone <= 0 || plateau.empty()) return {0, 0};
  std::nth_element(plateau.begin(), plateau.begin() + plateau.size() / 2, plateau.end());
  return {alone, plateau[plateau.size() / 2]};
}

struct ClockReading {
  std::string group, name;
  double alone_MHz = 0, plateau_MHz = 0;
  double gain() const { return plateau_MHz / alone_MHz; }
};

// Every clock file's cases with a reading; throws naming a file without any.
std::vector<ClockReading> clock_readings(const std::string& f) {
  const Json j = read_measurement(f);
  std::vector<ClockReading> out;
  for (const auto& c : j.value("cases", Json::array()))
    if (const auto [alone, plateau] = clocks_of(c); alone > 0) {
      const auto group = classify(c).first;
      out.push_back(
          {group.empty() ? c["class"].get<std::string>() : group, case_name(c), alone, plateau});
    }
  if (out.empty())
    throw std::runtime_error(f + ": no sm_clock_MHz readings (contention_bench.py --clock)");
  return out;
}
}  // namespace

std::map<std::string, double> measured_clock_gains(const std::vector<std::string>& files) {
  std::map<std::string, std::vector<double>> gains;
  for (const auto& f : files) {
    std::map<std::string, std::vector<double>> here;  // a later file's group replaces an earlier's
    for (const auto& r : clock_readings(f)) here[r.group].push_back(r.gain());
    for (auto& [g, v] : here) gains[g] = std::move(v);
  }
  std::map<std::string, double> out;
  for (auto& [g, v] : gains) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    out[g] = std::round(v[v.size() / 2] * 100) / 100;
  }
  return out;
}

double measured_clock_plateau_MHz(const std::vector<std::string>& files) {
  std::vector<double> v;
  for (const auto& f : files)
    for (const auto& r : clock_readings(f))
      if (const auto fam = hardware::family_of(r.group);
          fam != hardware::Family::count && fam < hardware::Family::ew_add)
        v.push_back(r.plateau_MHz);
  if (v.empty()) throw std::runtime_error("no compute kernel's clock readings in the clock files");
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return std::round(v[v.size() / 2]);
}

void apply_case_clock_gains(std::vector<ContentionCase>& cases,
                            const std::vector<std::string>& files) {
  std::map<std::string, double> by_name;  // a later file's reading of a case replaces an earlier's
  for (const auto& f : files)
    for (const auto& r : clock_readings(f)) by_name[r.name] = r.gain();
  for (auto& c : cases)
    if (c.shape.family < hardware::Family::ew_add)
      if (const auto it = by_name.find(c.name);
          it != by_name.end() && c.group.find(':') == std::string::npos)
        c.shape.clock_gain = static_cast<float>(it->second);
}

KernelShape recorded_gemm_shape(const Json& c) {
  const Json* l = major_launch(c);
  if (!l) throw std::runtime_error("a GEMM case without launch records");
  const Json& s = c["shape"];
  return hardware::gemm_shape(
      nvjet_launch(*l, {s.value("m", 0.0), s.value("n", 0.0), s.value("k", 0.0)}, 1));
}

}  // namespace twin::calibrate
