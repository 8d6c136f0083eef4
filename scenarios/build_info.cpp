#include "scenarios/build_info.hpp"

#include "scenarios/json_tree.hpp"
#include "twin_commit.hpp"  // generated at build time (cmake/TwinCommit.cmake)

#ifndef TWIN_VERSION
#define TWIN_VERSION "unknown"
#endif

namespace twin::scenarios {

const char* twin_version() {
  return TWIN_VERSION;
}
const char* twin_commit() {
  return TWIN_COMMIT;
}

Json provenance(const Json& resolved) {
  return {{"twin", twin_version()},
          {"commit", twin_commit()},
          {"resolved_fnv1a", content_hash(resolved)}};
}

}  // namespace twin::scenarios
