// One rank's step as a launch plan for real hardware (`twin run --plan FILE`): the kernels,
// copies and collectives of the forward and backward passes with their shapes, streams and
// dependencies, and the twin's times for each. calibrate/micro_step.py executes it on one GPU
// (an SM-holding kernel of the twin's collective duration standing in for each NCCL
// collective) and compares the measured times with the twin's (issue #6, micro-training step).
#pragma once

#include "model/step_graph.hpp"
#include "scenarios/loader.hpp"
#include "sim/task.hpp"

namespace twin::scenarios {

// Tasks of `rank` on GPU streams that start before its last gradient reached the host; each:
// {"id", "name", "stream", "category", "layer", "start_s", "end_s", "after": [ids],
//  "launches": [{"kind": "gemm"|"grouped_gemm"|"attention"|"elementwise"|"collective"|
//                "copy_h2d"|"copy_d2h"|"alloc_retry", shape fields, "category"}]}; markers have no
//  launches. A collective's fields: "ctas", "seconds" (the twin's), "collective" (all_gather |
//  reduce_scatter | all_reduce | all_to_all), "bytes" (nccl-tests' size), "comm" (dense | expert |
//  ep | node | replica | tp), "group" (its index among the communicator's groups) and
//  "group_ranks" (the members, global ranks in ring order): every member's plan lists a group's
//  collectives in the same order (`twin run --plan DIR --plan-ranks all`, one plan per rank, for
//  a multi-GPU executor with one NCCL communicator per group).
// Task i's launches (kernels with their shapes, bytes, collectives with CTAs), each with the
// twin's seconds for it; an allocator retry as such; empty for a marker or a task whose rank's
// launches were not recorded (StepBuilder::record_launches).
Json task_launches(const sim::TaskGraph& g, const model::StepBuilder& b, std::size_t i);

Json step_plan(const Scenario& s, const sim::TaskGraph& g, const model::StepBuilder& b,
               const model::StepMarks& marks, int rank);

}  // namespace twin::scenarios
