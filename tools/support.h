// Helpers shared by the CLI, the benchmark and the tests, one job per header under common/; this
// umbrella includes the ones the tools and tests have always had through it. Not part of the
// library's API.
//   common/backends.h   ggml backends, logs, RPC devices, the named setups
//   common/models.h     model and context pointers, contexts, prompts, batches, generated models
//   common/triggers.h   hooks, node triggers, the stateless probe
//   common/processes.h  run_command, rpc_server, delay_proxy
//   common/paths.h      executable, scripts, model cache, delay proxy binary
//   common/timing.h     now_ms, format_ms, the timed writer thread
//   common/threads.h    LLAMA_CANCEL_THREADS, the override of every context's thread count
// The others are included where they are used: common/stats.h (the benchmarks' statistics),
// common/stop_latency.h (throughput and stop latency of a decode configuration), common/seq_bytes.h
// (per-sequence bytes and outputs), common/args.h (the command-line parser), and the CLI's JSON
// helpers common/json.h and common/json_child.h.
#pragma once

#include "llama-cancel.h"
#include "llama.h"

#include "common/backends.h"
#include "common/models.h"
#include "common/paths.h"
#include "common/processes.h"
#include "common/threads.h"
#include "common/timing.h"
#include "common/triggers.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>
