// Tier 4: cuBLAS's launches (hardware/kernel_shapes.hpp) against the ones nvjet made on our H200,
// and the contention model on launches measured after the fit (files k and l, held out).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <vector>

#include "calibrate/contention_data.hpp"
#include "hardware/kernel_shapes.hpp"
#include "tests/calibrate_rig.hpp"

using namespace twin;
using namespace twin::test;  // kRoot, profile_model and the launch-record helpers

namespace {
// Per case of a contention file (named kernel[m=…,n=…]), the contention model's worst point on
// the launch nvjet really made, as the fit reads a curve: blocked points (the holders timed out,
// or the slowdown fell below 0.6 of its highest) are left out. `unstretched_s`: time of each
// measured launch that held SMs do not stretch, on top of the model's (file q's write-back).
std::map<std::string, double> recorded_worst(const char* file, bool signed_error = false,
                                             double unstretched_s = 0) {
  const auto model = profile_model("h200");
  std::ifstream in(kRoot / "reports/calibration/contention" / file);
  const auto doc = nlohmann::json::parse(in);
  std::map<std::string, double> worst;
  for (const auto& c : doc["cases"]) {
    const auto shape = calibrate::recorded_gemm_shape(c);
    const double alone = c["alone_ms"].get<double>() * 1e-3;
    const std::string name = fmt::format("{}[m={},n={}]", c["kernel"].get<std::string>(),
                                         c["shape"]["m"].get<int>(), c["shape"]["n"].get<int>());
    double most = 0, w = 0;
    for (const auto& p : c["points"]) {
      if (!p.contains("slowdown")) continue;  // the holders timed out: the kernel could not start
      const int k = p["held_sms"];
      const double y = p["slowdown"];
      most = std::max(most, y);
      const double fixed = unstretched_s / alone;
      const double t = fixed + (1 - fixed) * model.slowdown(shape, k, alone - unstretched_s);
      if (k == 0 || y < 0.6 * most || std::isinf(t)) continue;  // blocked, as the fit reads it
      if (std::abs(t / y - 1) > std::abs(w)) w = t / y - 1;
    }
    worst[name] = signed_error ? w : std::abs(w);
    MESSAGE(fmt::format("{} ({}): worst {:+.1f}%", name, file, 100 * w));
  }
  return worst;
}
}  // namespace

TEST_CASE("the router's staircases beside a few held SMs are nvjet's pairs (file k, held out)") {
  // The router GEMM (T × 384 × 6,144) at 0–32 SMs held, measured after the fit and not in it. At
  // 8,192 and 12,288 tokens (one tile per CTA) the steps are the cluster tables'; at 16,384 and
  // 24,576 (256 tiles on 132 CTAs) the late clusters are one light (1 held), one heavy starting
  // after a tile (2–3), heavy ones starting after two (4–16): ×1.0 / 1.44 / 1.83.
  const auto cases = calibrate::read_contention_cases(
      {(kRoot / "reports/calibration/contention/h200-2026-12-02-contention-k.json").string()});
  const auto model = profile_model("h200");
  // 32,768 and 49,152 tokens (2.9 and 3.9 tiles per CTA): first-static lists since
  // 2026-12-03 (kernel_shapes.cpp). 20,480 tokens (nvjet's 128×256 tiles, 1.8 per CTA, where the
  // twin takes 96×128): ×1.0 up to 8 held, which no list order gives; reported, not budgeted
  // (README "Where it misses").
  const auto budgeted = [](const std::string& name) {
    for (const int T : {8192, 12288, 16384, 24576, 32768, 49152})
      if (name.find(fmt::format("m={},", T)) != std::string::npos) return true;
    return false;
  };
  int checked = 0;
  for (const auto& c : cases) {
    if (!budgeted(c.name)) continue;
    CAPTURE(c.name);
    for (const auto& p : c.points) {
      CAPTURE(p.held);
      CHECK(std::abs(c.slowdown(model, p.held) / p.measured - 1) <= 0.06);
      ++checked;
    }
  }
  CHECK(checked >= 70);
}

TEST_CASE("cuBLAS launches as the twin chooses them are the ones measured") {
  // Every bf16 GEMM of the measurement files with a profiler record: nvjet's kernel name gives
  // its tile (…_<tile_m>x<tile_n>_<k tile>x<stages>_<cluster x>x<cluster y>_…) and the grid its
  // CTAs: every one must match its cluster and CTAs, and its tile but for two known misses —
  // 8,192³ on 320×128, a tile the twin's large-GEMM choice lacks, and the router at 20,480
  // tokens, where nvjet's 128×256 needs more padded work than the 96×128 the twin takes.
  int checked = 0;
  std::set<std::string> tile_misses, intensity_misses;
  for (const char* f : {"h200-2026-11-30-contention-a.json", "h200-2026-11-30-contention-b.json",
                        "h200-2026-12-02-contention-k.json"}) {
    std::ifstream in(kRoot / "reports/calibration/contention" / f);
    const auto doc = nlohmann::json::parse(in);
    for (const auto& c : doc["cases"]) {
      if (c["class"] != "gemm") continue;
      const auto& big =
          longest(c["launches"], [](const nlohmann::json& l) { return l["dur_us"].get<double>(); });
      const std::string kernel = big["name"];
      const auto recorded = nvjet_name_launch(kernel);
      const auto& s = c["shape"];
      const auto l = hardware::gemm_launch(132, s["m"], s["n"], s["k"]);
      CAPTURE(s.dump());
      CAPTURE(kernel);
      const double grid = ctas_of(big);
      CHECK(l.ctas == grid);
      CHECK(l.cluster == recorded.cluster);
      const std::string mn = fmt::format("{}x{}", s["m"].get<int>(), s["n"].get<int>());
      if (l.tile_m != recorded.tile_m || l.tile_n != recorded.tile_n)
        tile_misses.insert(mn);
      else if (std::abs(hardware::load_intensity(l) - hardware::load_intensity(recorded)) > 0.5)
        intensity_misses.insert(mn);
      ++checked;
    }
  }
  CHECK(checked == 24);
  CHECK(tile_misses == std::set<std::string>{"8192x8192", "20480x384"});
  // The cluster's orientation (which tile its CTAs share): where a launch runs one CTA per tile,
  // the one that pads its grid least (256×160 at 1,376 rows: 9 rows of tiles, so clusters along
  // M), then the one that loads least, which gives the recorded load intensity on 20 of the 22
  // launches whose tile it takes; nvjet orients these two the other way (2x1 for 256×128 at 1,376
  // rows, 1x2 for 128×256 at 32,768 tokens: 20–25% lower intensity than the twin's).
  CHECK(intensity_misses == std::set<std::string>{"1376x6144", "32768x384"});
}

TEST_CASE("a launch of one CTA per tile in clusters has its tiles padded to whole clusters") {
  // Every nvjet launch recorded here (H200 and H100 files) that runs at most one tile per CTA in
  // clusters, split-K's slices aside: its grid is its output tiles padded along M to cluster_m
  // and along N to cluster_n (kernel_shapes.hpp, padded_grid) — more CTAs than tiles on 23
  // launches (p's 129 tiles of 192 × 4,096 on 132 CTAs; 72 tiles in 2×4 clusters on 96).
  int launches = 0, padded = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(kRoot / "reports/calibration/contention")) {
    const auto file = e.path().filename().string();
    if (file.find("-contention-") == std::string::npos || e.path().extension() != ".json") continue;
    std::ifstream in(e.path());
    const auto doc = nlohmann::json::parse(in);
    if (!doc.is_object() || !doc.contains("cases")) continue;
    for (const auto& c : doc["cases"]) {
      if (!c.contains("launches") || !c["shape"].contains("m")) continue;
      for (const auto& l : c["launches"]) {
        const std::string kernel = l.value("name", "");
        if (kernel.rfind("nvjet_sm90_tst_", 0) != 0 || kernel.find("splitK") != std::string::npos)
          continue;
        const auto g = nvjet_name_launch(kernel);
        const double cols = std::ceil(c["shape"]["n"].get<double>() / g.tile_m),
                     rows = std::ceil(c["shape"]["m"].get<double>() / g.tile_n),
                     batch = c["shape"].value("batch", 1.0), grid = ctas_of(l);
        if (g.cluster == 1 || cols * rows * batch > grid) continue;  // persistent: tiles per CTA
        CAPTURE(file);
        CAPTURE(kernel);
        CAPTURE(c["shape"].dump());
        CHECK(hardware::padded_grid(g, cols, rows, batch) == grid);
        ++launches;
        padded += cols * rows * batch < grid;
        break;  // a case's first launch of each kind is enough
      }
    }
  }
  MESSAGE(fmt::format("{} launches of one tile per CTA in clusters, {} padded", launches, padded));
  CHECK(launches >= 251);
  CHECK(padded >= 23);
}

TEST_CASE("small-row cuBLAS launches as the twin chooses them (files l, p)") {
  // Every GEMM of at most 192 rows in files l and p (38): nvjet's one row of tiles, split-K and
  // clusters of 4 (kernel_shapes.cpp, small_row_launch, read off these launches). Its cluster
  // size and CTAs on all (36 before the grid was padded to whole clusters along each side: two
  // three-row launches take 120 and 132 CTAs for 114 and 129 tiles), its tile on 35 (32 before
  // two rows of 32 at 64 rows); and the twin's own launch then never finds no
  // room where nvjet ran (before: clusters of 8, "blocked" from 88 SMs held on file l's 64-row
  // launches).
  const auto model = profile_model("h200");
  int launches = 0, same_cluster = 0, same_ctas = 0, same_tile = 0;
  for (const char* f : {"h200-2026-12-03-contention-l.json", "h200-2026-12-03-contention-p.json"}) {
    std::ifstream in(kRoot / "reports/calibration/contention" / f);
    const auto doc = nlohmann::json::parse(in);
    for (const auto& c : doc["cases"]) {
      const auto& s = c["shape"];
      if (s["m"].get<double>() > 192) continue;
      const auto& big =
          longest(c["launches"], [](const nlohmann::json& l) { return l["dur_us"].get<double>(); });
      const auto recorded = nvjet_name_launch(big["name"]);
      const auto l = hardware::gemm_launch(132, s["m"], s["n"], s["k"]);
      const double grid = ctas_of(big);
      ++launches;
      same_cluster += l.cluster == recorded.cluster;
      same_ctas += l.ctas == grid;
      same_tile += l.tile_m == recorded.tile_m && l.tile_n == recorded.tile_n;
      CAPTURE(s.dump());
      for (const auto& p : c["points"])
        if (p.contains("slowdown"))
          CHECK(std::isfinite(model.slowdown(hardware::gemm_shape(l), p["held_sms"])));
    }
  }
  MESSAGE(fmt::format("{} launches: cluster {}, CTAs {}, tile {}", launches, same_cluster,
                      same_ctas, same_tile));
  CHECK(launches == 38);
  CHECK(same_cluster == 38);
  CHECK(same_ctas == 38);
  CHECK(same_tile >= 35);
}

TEST_CASE("held-out cuBLAS launches (files l, o): the mechanisms on the launches nvjet made") {
  // Measured after the fit (2026-12-03). File l: the expert projections at 64–768 rows and the
  // router at 28,672–65,536 tokens, on tiles, clusters of 4 and split-K slices none of the fitted
  // cases used. File o: Newton–Schulz's B·X as one GEMM at 1,536–3,072 rows, launches of 1.7–4.9
  // tiles per CTA around the static/first-static switch. With each launch as recorded, the
  // contention model's worst point per case, apart from the twin's own launch choice
  // (gemm_launch, `twin kernel`; README, "Held-out launches").
  std::map<std::string, double> worst;
  for (const char* file :
       {"h200-2026-12-03-contention-l.json", "h200-2026-12-03-contention-o.json"})
    worst.merge(recorded_worst(file));
  CHECK(worst.size() == 25);
  // Within the 15%: every launch but these, budgeted at today's misses so that they
  // cannot grow unseen — the expert up projection at 192 rows (nvjet's clusters of 4 with one
  // tile per CTA: +15.0% with its kernel's own lone line, file lone-more; −18.0% before; at 64
  // and 96 rows, split-K, the reduction as a kernel of its own and then on cuBLASLt's own grid
  // took them from −17.6% and −16.6% to within 6%); B·X's clusters of 8 at 2.8 tiles per CTA
  // (static lists, as the fitted Newton–Schulz case wants; alone it runs first-static: 3.0%);
  // 224 tiles on 132 CTAs (1.7 per CTA, which no list order fits, like the 20,480-token router).
  // The router at 28,672 and 36,864 tokens and B·X at 2,048, 3,072 and 1,792 × 8,192 (2.8–3.9
  // tiles per CTA in pairs) miss by 16–31% on static lists and 2.5–6.8% on first-static ones
  // (kernel_shapes.cpp, the switch).
  const std::map<std::string, double> known = {{"expert_up[m=192,n=3584]", 0.16},
                                               {"square_rows[m=1792,n=6144]", 0.19},
                                               {"square_rows[m=1792,n=4096]", 0.40}};
  for (const auto& [name, w] : worst) {
    CAPTURE(name);
    const auto it = known.find(name);
    CHECK(w <= (it == known.end() ? 0.15 : it->second));
  }
}

TEST_CASE("held-out small-row cuBLAS launches (files p, q, reduce): a lone CTA's saturation") {
  // 32 GEMMs of 32–192 rows on four weight shapes, measured after file l's misses and before
  // any change for them; q after a flush of L2 (README, "Held-out small-row launches"). Their
  // full round is bound by what its CTAs stream, so beside held SMs it costs little more while
  // a late round of lone CTAs costs a lone CTA's time (mechanism 3's own saturation: before it,
  // the rounds overcharged them by up to +110% and +148%; taking it where the load intensity's
  // a_sat was lower, nvjet's 1x2_h pairs at 64 rows −37% → −13%, and split-K's reduction as a
  // kernel of its own, those launches −9…−20% → −9…+10%; a lone CTA per nvjet kernel, the
  // 192-row 96×64 pairs −27% → −10% and −22% → +21%, the worst point 27% → 21%, three launches
  // more beyond 15% by a point or two; every measured kernel's own lone line, file lone-more,
  // p's launches beyond 15% five → three, q's five → six; the reduction on cuBLASLt's own grid,
  // 512-thread blocks four to an SM, many waves on the SMs left: p's median 10.9% → 10.0%, the
  // split-K launches' −8…−17% with 72–124 held to −8…+11%, q's worst 17.1% → 13.1%; its own β
  // and unstretched launch, file reduce: p's median 10.0% → 8.8%, q's 8.0% → 8.4%). Known gaps,
  // held at today's misses: the 96×64 pairs overcharged with few SMs held (+21%: a late round
  // starts before the full one ends, not modelled), the 160-row 64×96 tiles faster (+20%).
  // File reduce (2026-12-05) ran p's GEMMs and file l's expert rows again at 0–124 held, for
  // their split-K reduction's own times (test_calibrate): held out too (32 × 14,336 timed out).
  // Files split-k-more and cluster-pad (2026-12-05, an H100: the H200's SMs, clocks and L2, the
  // model taken as is) ran new small-row shapes, the second after its curves were predicted; on
  // the launches nvjet made, as the others (README, "Held out on an H100"). The same two sets on
  // our H200 (2026-12-06; 32 × 1,024 × 8,192 lost to a holder timeout as on the H100): nvjet
  // chose another kernel than on the H100 for 12 of 29; the 192-row launches' late rounds miss
  // (+18%, +20%) as file p's do. File p2 (2026-12-06, night) is file p again on a second H200:
  // its points within 1.8% of p's (median; 9.6% at worst), and the same two launches miss (160 ×
  // 4,096 +27.6%, 192 × 4,096 +16.9%) with 48 × 4,096 (+16.3%, p's +6.8%): model gaps that
  // reproduce on another card (contention README, "File p on a second H200").
  struct Budget {
    std::string file;
    std::size_t launches;
    double median, worst;
    int within;  // launches within the 15%
  };
  for (const auto& b :
       {Budget{"h200-2026-12-03-contention-p.json", 32, 0.09, 0.21, 30},
        Budget{"h200-2026-12-03-contention-q.json", 32, 0.085, 0.14, 32},
        Budget{"h200-2026-12-05-contention-reduce.json", 43, 0.09, 0.28, 40},
        Budget{"h100-2026-12-05-contention-split-k-more.json", 19, 0.095, 0.16, 18},
        Budget{"h100-2026-12-05-contention-cluster-pad.json", 10, 0.095, 0.22, 7},
        Budget{"h200-2026-12-06-contention-split-k-more-cluster-pad.json", 29, 0.07, 0.20, 27},
        Budget{"h200-2026-12-06-contention-p2.json", 32, 0.095, 0.28, 29}}) {
    CAPTURE(b.file);
    const auto worst = recorded_worst(b.file.c_str());
    REQUIRE(worst.size() == b.launches);
    std::vector<double> v;
    for (const auto& [name, w] : worst) v.push_back(w);
    std::sort(v.begin(), v.end());
    CHECK(0.5 * (v[(v.size() - 1) / 2] + v[v.size() / 2]) <= b.median);
    CHECK(v.back() <= b.worst);
    CHECK(std::count_if(v.begin(), v.end(), [](double w) { return w <= 0.15; }) >= b.within);
  }
}

TEST_CASE("file q is file p plus the write-back of its flush's dirty L2 (files p, q, w)") {
  // File q wrote 256 MiB before each timed launch (contention_bench.py --flush-l2-mib), meant to
  // put the operands in HBM. File w (2026-12-04, dirty_l2_probe.py) times four of these GEMMs after
  // a write (L2 left dirty) and after a read (L2 clean, holding other data) of the same bytes: the
  // write costs the launch its L2's write-back; the read costs it only what its operands lose
  // from L2 (3.1–3.6 µs for the 28 MiB weights, ≤ 1.5 µs for the others; README, "What file q's
  // flush adds").
  std::ifstream in(kRoot / "reports/calibration/contention/h200-2026-12-04-dirty-l2-w.json");
  const auto w = nlohmann::json::parse(in);
  std::vector<double> write_back;
  for (const auto& c : w["cases"]) {
    const auto& t = c["median_us"];
    const double none = t["none"], written = t["write_256MiB"], read = t["read_256MiB"];
    if (c["shape"][0].get<int>() > 192) continue;  // 8,192³: no small-row launch
    CAPTURE(c["shape"].dump());
    CHECK(written - none >= 1.0);
    CHECK(written - read >= 1.0);
    write_back.push_back(written - none);
  }
  REQUIRE(write_back.size() == 4);
  std::sort(write_back.begin(), write_back.end());
  const double wb_s = 0.5 * (write_back[1] + write_back[2]) * 1e-6;  // the median
  CHECK(wb_s >= 5e-6);
  CHECK(wb_s <= 8e-6);
  const auto median_abs = [](const std::map<std::string, double>& worst) {
    std::vector<double> v;
    for (const auto& [name, e] : worst) v.push_back(std::abs(e));
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double p = median_abs(recorded_worst("h200-2026-12-03-contention-p.json"));
  const double q = median_abs(recorded_worst("h200-2026-12-03-contention-q.json"));
  const double q_wb = median_abs(recorded_worst("h200-2026-12-03-contention-q.json", false, wb_s));
  MESSAGE(
      fmt::format("median worst miss: p {:.1f}%, q {:.1f}%, q with {:.1f} µs of write-back "
                  "{:.1f}%",
                  100 * p, 100 * q, wb_s * 1e6, 100 * q_wb));
  // Read as unstretched time, the write-back leaves q's misses at p's (before the lone CTA's
  // saturation it brought them from 65% to 27%; now q without it is as close: the longer time
  // alone lowers a lone CTA's share ρ, which the model then reads as saturation).
  CHECK(std::abs(q_wb - p) <= 0.05);
}
