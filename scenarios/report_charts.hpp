// The charts of `twin report` (issue #19): each turns one of the twin's outputs — a run's JSON
// and trace, an allocation sequence, the ladder, a sweep, a plan-dp run, the contention fit —
// into a Vega-Lite chart with its data inline (reports/html_page.hpp lays them out).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "reports/html_page.hpp"
#include "reports/step_report.hpp"
#include "scenarios/kineto.hpp"
#include "scenarios/loader.hpp"

namespace twin::scenarios {

using reports::Chart;

// `twin run --json`'s result: the step of rank 0 and the slowest rank, and GPU time per kind.
Chart breakdown_chart(const reports::StepReport& result);
Chart gpu_time_chart(const reports::StepReport& result);
// Grace (host) memory per component at its peak, with the capacity.
Chart host_memory_chart(const reports::MemoryReport& memory);
// A Chrome trace of `simulate` (traceEvents): every stream's tasks of the traced ranks, and the
// SMs NCCL holds on each over the step.
Chart timeline_chart(const Json& trace);
Chart nccl_sms_chart(const Json& trace);
// Rank 0's HBM allocated (or reserved) per allocator pool over the step, from the trace's
// hbm_allocated_GiB (hbm_reserved_GiB) counter (at most ~2,000 samples).
Chart hbm_pools_chart(const Json& trace, bool reserved);
// `twin ladder --json`: predicted and published tokens/s per GPU per rung.
Chart ladder_chart(const Json& ladder);
// The rows of `twin sweep` (grid keys are the dotted columns): a heatmap of tokens/s per GPU
// over the first two grid keys, one panel per value of the others, points that cannot run
// marked; one key: a line. Throws InputError (file) if there is nothing to draw.
Chart sweep_chart(const Json& rows, const std::string& file);
// `twin plan-dp --json`: tokens/s per GPU over the number of replicas.
Chart plan_dp_chart(const Json& plan_dp);
// The contention fit (twin-fit-contention --out): measured slowdowns and the model's, per family.
Chart contention_chart(const Json& fit);

// A real step (a trace's spans) above the twin's plan of the same rank, stream by stream, and
// their time per category side by side (`twin report --kineto`, issue #20).
Chart compare_timeline_chart(const std::vector<Span>& real, const std::vector<Span>& twin);
Chart compare_categories_chart(const std::vector<Span>& real, const std::vector<Span>& twin);

}  // namespace twin::scenarios
