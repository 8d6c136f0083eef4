// The comm plan: communicators, their process groups and each collective's CTAs, decided once.
#include <doctest/doctest.h>

#include "model/comm_plan.hpp"

using namespace twin::model;
using twin::hardware::CollKind;
using twin::hardware::NcclOptions;

TEST_SUITE("model.comm_plan") {
  TEST_CASE("CTAs: NCCL's own counts, capped by NCCL_MAX_CTAS, all-to-alls a power of two") {
    Job job;  // the final published setup: bf16 gradient all-to-all, node-local reshard, Muon
    const auto free = plan_comms(job, NcclOptions{}, 132);
    CHECK(free[StepColl::dense_gather].ctas == 8);
    CHECK(free[StepColl::expert_gather].ctas == 40);
    CHECK(free[StepColl::expert_grad_reduce].kind == CollKind::all_to_all);
    CHECK(free[StepColl::expert_grad_reduce].ctas == 64);
    CHECK(free[StepColl::nvlink_gather].comm == Comm::node);
    CHECK(free[StepColl::nvlink_gather].ctas == 24);
    const auto capped = plan_comms(job, NcclOptions{24, {}}, 132);
    CHECK(capped[StepColl::expert_gather].ctas == 24);
    CHECK(capped[StepColl::expert_grad_reduce].ctas == 32);  // 24 rounded up to 2⁵
    CHECK(capped[StepColl::dense_gather].ctas == 8);
    job.training.grad_reduce = GradReduce::fp32_reduce_scatter;
    const auto rs = plan_comms(job, NcclOptions{}, 132);
    CHECK(rs[StepColl::expert_grad_reduce].kind == CollKind::reduce_scatter);
    CHECK(rs[StepColl::expert_grad_reduce].ctas == 40);
  }
  // The EP exchange is NCCL's all-to-all only per pair; a per-rank dispatcher (HybridEP,
  // DeepEP) runs on its own SMs, which NCCL_MAX_CTAS does not cap.
  TEST_CASE("CTAs: NCCL_MAX_CTAS caps the EP exchange only when NCCL runs it") {
    Job job;
    job.training.ep_dispatch = EpDispatch::per_rank;
    CHECK(plan_comms(job, NcclOptions{8, {}}, 132)[StepColl::ep_all_to_all].ctas == 16);
    job.training.ep_dispatch = EpDispatch::pairs;
    CHECK(plan_comms(job, NcclOptions{8, {}}, 132)[StepColl::ep_all_to_all].ctas == 8);
  }
  TEST_CASE("buffered channels: per communicator its widest collective, summed") {
    Job job;
    job.model.experts = 384;  // a MoE: expert and EP communicators
    job.parallel.dp = 1;
    // dense 8 + expert max(40, 64) + EP 16 + node 24 = 112; no replica communicator at DP = 1.
    CHECK(plan_comms(job, NcclOptions{}, 132).buffered_channels() == 112);
    job.parallel.dp = 2;  // + the replicas' all-reduce, 8
    CHECK(plan_comms(job, NcclOptions{}, 132).buffered_channels() == 120);
    NcclOptions wide;
    wide.default_ctas.replica_all_reduce = 32;
    const auto w = plan_comms(job, wide, 132);
    CHECK(w[StepColl::replica_all_reduce].ctas == 32);
    CHECK(w[StepColl::replica_all_reduce].comm == Comm::replica);
    CHECK(w.buffered_channels() == 144);
    job.training.dense_reshard = DenseReshard::global;  // no node-local re-gather: − 24
    CHECK(plan_comms(job, NcclOptions{}, 132).buffered_channels() == 96);
    // NCCL_MAX_CTAS = 16: dense 8 + expert 16 + EP 16 + replica 8.
    CHECK(plan_comms(job, NcclOptions{16, {}}, 132).buffered_channels() == 48);
  }
  TEST_CASE("process groups of 2 replicas of 8 GPUs, EP 4, 4 GPUs per node") {
    ParallelPlan p;
    p.replica_gpus = 8, p.ep = 4, p.dp = 2;
    const auto all = process_groups(p, 16, 4, 1);
    CHECK(all[Comm::dense] ==
          std::vector<std::vector<int>>{{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14, 15}});
    REQUIRE(all[Comm::expert].size() == 8);  // 4 blocks per replica
    CHECK(all[Comm::expert][1] == std::vector<int>{1, 5});
    CHECK(all[Comm::ep][3] == std::vector<int>{12, 13, 14, 15});
    CHECK(all[Comm::node].size() == 4);
    CHECK(all[Comm::replica][2] == std::vector<int>{2, 10});
    CHECK_FALSE(all.replicas_are_copies);
    // One replica simulated, standing for both: each replica group is its one rank.
    const auto one = process_groups(p, 8, 4, 2);
    CHECK(one.replicas_are_copies);
    CHECK(one[Comm::replica][5] == std::vector<int>{5});
    CHECK_THROWS_AS(process_groups(p, 12, 4, 1), std::invalid_argument);
    CHECK_THROWS_AS(process_groups(p, 8, 4, 1), std::invalid_argument);  // neither 1 nor all
  }
}
