// Helpers shared by the CLI, the benchmark and the tests, one job per header under common/; this
// umbrella includes the ones the tools and tests have always had through it. Not part of the
// library's API.
//   common/backends.h   ggml backends, logs, RPC devices, the named setups
//   common/models.h     model and context pointers, contexts, prompts, batches, generated models
//   common/triggers.h   hooks, node triggers, the stateless probe
//   common/processes.h  run_command, rpc_server, delay_proxy
//   common/paths.h      executable, scripts, model cache, delay proxy binary
//   common/timing.h     now_ms, format_ms, the timed writer thread
// (common/stats.h and common/json.h, the benchmarks' statistics and JSON text, come with bench_util.h.)
#pragma once

#include "llama-cancel.h"
#include "llama.h"

#include "common/backends.h"
#include "common/models.h"
#include "common/paths.h"
#include "common/processes.h"
#include "common/timing.h"
#include "common/triggers.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>
