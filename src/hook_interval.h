// The hook's checkpoint interval, seen from the decode: a stop-time budget lowers it for one call.
#pragma once

#include "llama-cancel.h"

namespace llama_cancel {

// Target compute time between the hook's checkpoints, ms; 0 for a NULL hook.
double hook_interval_ms(const llama_cancel_hook * hook);
// Sets it (learnt rates scale with it); no-op for a NULL hook.
void hook_set_interval_ms(llama_cancel_hook * hook, double ms);

} // namespace llama_cancel
