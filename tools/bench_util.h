// The benchmarks' shared pieces, now under common/: statistics (stats.h), JSON text (json.h) and
// the timed writer thread (timing.h). Kept so that the benchmark files include one header.
#pragma once

#include "common/json.h"
#include "common/stats.h"
#include "common/timing.h"
