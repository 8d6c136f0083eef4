#include "scenarios/scenario.hpp"

namespace twin::scenarios {

const sim::Schema<Scenario>& scenario_schema() {
  static const sim::Schema<Scenario> s = [] {
    sim::Schema<Scenario> s;
    s.text(
         "name", std::nullopt, "scenario name", [](auto& x) -> auto& { return x.name; })
        .text(
            "description", std::string(), "what this scenario is",
            [](auto& x) -> auto& { return x.description; })
        .text(
            "model.preset", std::string(),
            "model file to start from: scenarios/models/<name>.json (or a path); keys given "
            "beside it override the file's",
            [](auto& x) -> auto& { return x.model_preset; })
        .include(
            "model", model::model_schema(), [](auto& x) -> auto& { return x.job.model; })
        .text(
            "hardware.profile", std::string(),
            "hardware profile to start from: hardware/profiles/<name>.json (or a path)",
            [](auto& x) -> auto& { return x.hardware_profile; })
        .include(
            "hardware", hardware::profile_schema(), [](auto& x) -> auto& { return x.hw; })
        .include(
            "parallel", model::parallel_schema(), [](auto& x) -> auto& { return x.job.parallel; })
        .include(
            "training", model::training_schema(), [](auto& x) -> auto& { return x.job.training; })
        .include(
            "data", model::data_schema(), [](auto& x) -> auto& { return x.job.data; })
        .include(
            "nccl", hardware::nccl_options_schema(), [](auto& x) -> auto& { return x.nccl; })
        .include(
            "placement", hardware::placement_schema(), [](auto& x) -> auto& { return x.placement; })
        .include(
            "shared", hardware::shared_machine_schema(),
            [](auto& x) -> auto& { return x.placement.shared; });
    return s;
  }();
  return s;
}

}  // namespace twin::scenarios
