// Which twin made an output: its version, the commit it was built from, and a hash of the
// resolved scenario (issue #19 item 3); every JSON output, the sweep's rows and traces carry it.
#pragma once

#include "scenarios/loader.hpp"

namespace twin::scenarios {

const char* twin_version();
const char* twin_commit();  // short git commit, "-dirty" if the tree had changes, or "unknown"
// {"twin": version, "commit": commit, "resolved_fnv1a": content_hash(resolved)}.
Json provenance(const Json& resolved);

}  // namespace twin::scenarios
