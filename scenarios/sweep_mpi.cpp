#include "scenarios/sweep_mpi.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>

#ifdef TWIN_HAVE_MPI
#include <mpi.h>
#endif

namespace twin::scenarios {

#ifdef TWIN_HAVE_MPI
namespace {

// Started by an MPI launcher: Open MPI, MPICH/Hydra and Slurm's PMI/PMIx set one of these.
bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

struct Mpi {
  int size = 1, rank = 0;
  Mpi() {
    if (!launched_by_mpi()) return;
    MPI_Init(nullptr, nullptr);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  }
  ~Mpi() {
    int up = 0;
    MPI_Initialized(&up);
    if (up) MPI_Finalize();
  }
};

const Mpi& mpi() {
  static const Mpi m;
  return m;
}

constexpr int kWork = 1, kRow = 2, kFailed = 3;
constexpr unsigned long long kStop = ~0ULL;

std::string receive_text(int& source, int& tag) {
  MPI_Status st;
  MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
  int n = 0;
  MPI_Get_count(&st, MPI_CHAR, &n);
  std::string text(static_cast<std::size_t>(n), '\0');
  MPI_Recv(text.data(), n, MPI_CHAR, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  source = st.MPI_SOURCE, tag = st.MPI_TAG;
  return text;
}

void send_index(unsigned long long i, int to) {
  MPI_Send(&i, 1, MPI_UNSIGNED_LONG_LONG, to, kWork, MPI_COMM_WORLD);
}

void serve(const std::function<Json(std::size_t)>& point) {
  while (true) {
    unsigned long long i = 0;
    MPI_Recv(&i, 1, MPI_UNSIGNED_LONG_LONG, 0, kWork, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (i == kStop) return;
    std::string msg;
    int tag = kRow;
    try {
      msg = std::to_string(i) + "\n" + point(static_cast<std::size_t>(i)).dump();
    } catch (const std::exception& e) {
      msg = e.what(), tag = kFailed;
    }
    MPI_Send(msg.data(), static_cast<int>(msg.size()), MPI_CHAR, 0, tag, MPI_COMM_WORLD);
  }
}

}  // namespace

int mpi_size() {
  return mpi().size;
}
int mpi_rank() {
  return mpi().rank;
}

std::map<std::size_t, Json> run_over_mpi(
    const std::vector<std::size_t>& todo, const std::function<Json(std::size_t)>& point,
    const std::function<void(std::size_t, const Json&)>& on_row) {
  std::map<std::size_t, Json> rows;
  if (mpi_rank() != 0) {
    serve(point);
    return rows;
  }
  std::size_t next = 0;
  int busy = 0;
  for (int r = 1; r < mpi_size(); ++r)
    if (next < todo.size())
      send_index(todo[next++], r), ++busy;
    else
      send_index(kStop, r);
  std::string failure;
  while (busy > 0) {
    int from = 0, tag = 0;
    const std::string text = receive_text(from, tag);
    if (tag == kFailed) {
      if (failure.empty()) failure = text;
      next = todo.size();  // hand out no more
    } else {
      const auto nl = text.find('\n');
      const std::size_t i = std::stoull(text.substr(0, nl));
      rows[i] = Json::parse(text.substr(nl + 1));
      on_row(i, rows[i]);
    }
    if (next < todo.size())
      send_index(todo[next++], from);
    else
      send_index(kStop, from), --busy;
  }
  if (!failure.empty()) throw InputError("twin sweep", "", failure + " (raise --max-events)");
  return rows;
}

#else

int mpi_size() {
  return 1;
}
int mpi_rank() {
  return 0;
}
std::map<std::size_t, Json> run_over_mpi(const std::vector<std::size_t>&,
                                         const std::function<Json(std::size_t)>&,
                                         const std::function<void(std::size_t, const Json&)>&) {
  throw std::logic_error("run_over_mpi: built without MPI");
}

#endif

}  // namespace twin::scenarios
