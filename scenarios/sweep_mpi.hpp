// A sweep over the ranks of an MPI job (`mpirun -n N twin sweep ...`, or srun): rank 0 hands the
// points out one at a time as ranks finish theirs (dynamic: a slow point does not hold up a
// slice) and keeps every row; it alone writes the sweep's files. Built when CMake finds MPI
// (TWIN_HAVE_MPI); used only when the process was started by an MPI launcher, so a plain
// `twin sweep` never initialises MPI.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <vector>

#include "scenarios/loader.hpp"

namespace twin::scenarios {

// The MPI job's size, initialising MPI on the first call when a launcher started this process
// (1 without MPI, or when run on its own).
int mpi_size();
int mpi_rank();  // 0 without MPI

// On rank 0: each index of `todo` run by the other ranks through `point`, `on_row` called on
// rank 0 as each row arrives; returns the rows by index. On the other ranks: runs what rank 0
// sends until told to stop; returns nothing. A point that throws (the event budget) stops the
// sweep: rank 0 throws InputError with its message once every rank has stopped.
std::map<std::size_t, Json> run_over_mpi(
    const std::vector<std::size_t>& todo, const std::function<Json(std::size_t)>& point,
    const std::function<void(std::size_t, const Json&)>& on_row);

}  // namespace twin::scenarios
