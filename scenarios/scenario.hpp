// A scenario: model × plan × training options × hardware profile × NCCL settings × data
// (Calculon's application / execution / system split), as typed structs.
#pragma once

#include <string>

#include "hardware/nccl_options.hpp"
#include "hardware/placement.hpp"
#include "hardware/profile.hpp"
#include "model/job.hpp"
#include "sim/param.hpp"

namespace twin::scenarios {

struct Scenario {
  std::string name;
  std::string description;
  std::string model_preset;      // scenarios/models/<name>.json the model was taken from
  std::string hardware_profile;  // hardware/profiles/<name>.json the profile was taken from
  model::Job job;
  hardware::Profile hw;
  hardware::NcclOptions nccl;
  hardware::PlacementOptions placement;
};

// Every key a resolved scenario has, from the tables next to the code that uses them.
const sim::Schema<Scenario>& scenario_schema();

// Values that each pass their own range but cannot go together (the model's shapes against the
// plan, the hardware tables, the machine against the job): throws sim::ParamError naming the
// keys in conflict, for the loader to blame the one the user set.
void check_cross_fields(const Scenario& s);

}  // namespace twin::scenarios
