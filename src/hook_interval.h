// What the decode needs from the eval callbacks: the hook's checkpoint interval, which a stop-time
// budget lowers for one call, and whether the stateless callback stopped a graph.
#pragma once

#include "llama-cancel.h"

namespace llama_cancel {

// Target compute time between the hook's checkpoints, ms; 0 for a NULL hook.
double hook_interval_ms(const llama_cancel_hook * hook);
// Sets it (learnt rates scale with it); no-op for a NULL hook.
void hook_set_interval_ms(llama_cancel_hook * hook, double ms);

// True when llama_cancel_eval_callback stopped a graph on the calling thread since the last call;
// clears that. ggml's scheduler runs cb_eval on the thread that called llama_decode.
bool take_stateless_stop();

} // namespace llama_cancel
