// `twin memory`: where HBM and Grace memory go in one simulated step (model/step_memory.hpp,
// model/caching_allocator.hpp, model/host_memory.hpp): per allocator pool (stream) and per host
// component, with retries, out-of-memory and the host out-of-memory risk.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <ostream>

#include "reports/output.hpp"
#include "scenarios/commands.hpp"
#include "scenarios/simulate.hpp"

namespace twin::scenarios {

namespace {

void print_rank(std::ostream& out, const reports::RankMemory& r, const char* who) {
  fmt::print(out,
             "HBM, {}rank {}: peak allocated {:.2f} GiB, peak reserved {:.2f} GiB, "
             "retries {}, inactive split at peak {:.2f} GiB{}\n",
             who, r.rank, r.peak_allocated_GiB, r.peak_reserved_GiB, r.alloc_retries,
             r.inactive_split_at_peak_GiB,
             r.oom ? fmt::format(", OUT OF MEMORY at {}", r.failed_allocation) : "");
  fmt::print(out, "  {:<16}{:>12}{:>12}{:>14}{:>14}{:>14}\n", "pool (GiB)", "peak alloc",
             "peak resv", "alloc@peak", "resv@peak", "cached@peak");
  for (const auto& p : r.pools)
    fmt::print(out, "  {:<16}{:>12.2f}{:>12.2f}{:>14.2f}{:>14.2f}{:>14.2f}\n", p.pool,
               p.peak_allocated_GiB, p.peak_reserved_GiB, p.at_peak_allocated_GiB,
               p.at_peak_reserved_GiB, p.cached_unused_at_peak_GiB);
  if (!r.pools[0].at_first_retry_reserved_GiB) return;
  // The moment JOB.md §6.12 describes: the compute stream's request fails while the side
  // streams' caches hold memory it cannot use.
  double side_resv = 0, side_alloc = 0;
  for (const auto& p : r.pools)
    if (p.pool != "compute") {
      side_resv += *p.at_first_retry_reserved_GiB;
      side_alloc += *p.at_first_retry_allocated_GiB;
    }
  const auto& c = r.pools[0];
  fmt::print(out,
             "  before the first retry: side streams {:.2f} GiB reserved, {:.2f} in use; compute "
             "pool {:.2f} GiB cached but unused\n",
             side_resv, side_alloc,
             *c.at_first_retry_reserved_GiB - *c.at_first_retry_allocated_GiB);
}

}  // namespace

void print_memory(std::ostream& out, const reports::MemoryReport& m) {
  fmt::print(out,
             "HBM for the caching allocator: {:.2f} GiB (after the CUDA context, {:.2f} GiB "
             "of NCCL buffers, {:.2f} GiB of the EP dispatcher's buffer and {:.2f} GiB of host "
             "pages in HBM)\n",
             m.hbm_capacity_GiB, m.nccl_buffers_GiB, m.ep_buffers_GiB, m.host_pages_in_hbm_GiB);
  print_rank(out, m.rank0, "");
  const auto& w = m.worst_rank;
  if (w.rank != m.rank0.rank)
    print_rank(out, w, w.oom ? "first out of memory, " : "most reserved, ");
  fmt::print(out, "ranks with allocator retries: {}\n", m.ranks_with_retries);
  fmt::print(out, "Host memory per rank (GiB):\n");
  for (const auto& [k, v] : m.host_parts_GiB) fmt::print(out, "  {:<30}{:>8.2f}\n", k, v);
  fmt::print(out, "  {:<30}{:>8.2f} of {:.2f}, headroom {:.2f}\n", "total", m.host_peak_GiB,
             m.host_capacity_GiB, m.host_headroom_GiB);
  fmt::print(out, "probability that a socket of the job lacks room at start: {:.3g}{}\n",
             m.host_oom_probability, reports::host_risk_caveat(m));
}

int cmd_memory(const CommonArgs& args, const MemoryArgs& mem, std::ostream& out) {
  const auto loaded = load_scenario(args.scenario, args.load_options());
  args.check_output(mem.events_file, "--events");
  args.check_output(mem.snapshot_file, "--snapshot");
  RunOptions o = args.run_options();
  o.alloc_events_rank = mem.events_file.empty() ? -1 : mem.events_rank;
  o.snapshot_rank = mem.snapshot_file.empty() ? -1 : mem.events_rank;
  const auto r = simulate(loaded, o);
  auto write = [&](const std::string& file, const Json& j) {
    if (file.empty()) return;
    if (j.is_null())
      throw InputError(args.scenario, "--events-rank",
                       fmt::format("rank {} is not in the job", mem.events_rank));
    reports::write_atomic(file, j.dump() + "\n");
  };
  write(mem.events_file, r.alloc_events);
  write(mem.snapshot_file, r.memory_snapshot);
  if (args.json)
    out << reports::to_json(r.report.memory).dump(2) << "\n";
  else
    print_memory(out, r.report.memory);
  return 0;
}

}  // namespace twin::scenarios
