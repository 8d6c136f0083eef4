// Fixture for the layering test: sim/ must not include model/.
#include "model/job.hpp"
