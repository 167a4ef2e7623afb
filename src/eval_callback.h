// What the decode needs from the eval callbacks (eval_callback.cpp): a cap on the checkpoint
// interval, which a stop-time budget sets for one call, whether a graph was stopped, and the longest
// time between checkpoints on a device, to size a budget's slices where no abort callback times nodes.
#pragma once

#include "llama-cancel.h"

#include <cstdint>

namespace llama_cancel {

// Hard upper bound on the hook's checkpoint interval, ms (0: none; checkpoint_policy::set_cap);
// 0 for a NULL hook. Setting it is a no-op for a NULL hook.
double hook_cap_ms(const llama_cancel_hook * hook);
void   hook_set_cap_ms(llama_cancel_hook * hook, double ms);
// Bytes the hook reads beside its own during the next calls (per-sequence cancel: those of the
// sequences in the llama_decode call in flight); NULL/0: none. The array must outlive the calls.
void hook_watch_seq_flags(llama_cancel_hook * hook, const int8_t * const * flags, size_t n);
// The hook's longest time between two checkpoints on a device since the last take, ms.
double hook_take_longest_view_ms(llama_cancel_hook * hook);

// The same for llama_cancel_eval_callback on the calling thread (its state is per thread, and
// ggml's scheduler runs cb_eval on the thread that called llama_decode).
double stateless_cap_ms();
void   stateless_set_cap_ms(double ms);
double take_stateless_longest_view_ms();
// True when llama_cancel_eval_callback stopped a graph on the calling thread since the last call;
// clears that.
bool take_stateless_stop();
// How many times either eval callback was asked about a node on a device (not in host memory) on
// the calling thread: a CPU node timer sees from it that a device split ran in between.
uint64_t device_asks();

} // namespace llama_cancel
