// The bench's stop-time budget rows (CPU), measured in this process: for each budget, worst and p95
// stop latency and the prefill throughput against no budget, side by side in one run. Part of the
// `bench` command.
#pragma once

#include "bench/bench.h"

namespace bench {

// Budget rows on the model benchmarked and, `with_large`, on a larger generated one whose longest
// node at batch 512 is several times the middle budget; ok: every row's worst stop within its
// budget + 2 ms.
section budget_rows(const options & opt, bool with_large);

} // namespace bench
