// What the library's calls read of a llama_cancel_hook besides its callback (src/checkpoints/eval_callback.cpp).
#pragma once

#include "llama-cancel.h"

namespace llama_cancel {

class memory_snapshot;
struct call;

// The snapshots `hook` keeps for the calls made with it, their buffers kept across calls: one for
// a decode's llama_decode calls, one for an mtmd evaluation's chunks (which holds decodes inside).
// NULL for NULL.
memory_snapshot * hook_decode_snapshot(llama_cancel_hook * hook);
memory_snapshot * hook_chunk_snapshot(llama_cancel_hook * hook);

// The abort callback the host had in the context params it bound `hook` into (NULL: none).
struct host_abort {
    ggml_abort_callback callback = nullptr;
    void *              data     = nullptr;
};
host_abort hook_host_abort(const llama_cancel_hook * hook);

// The host's own abort callback for a call on a llama context, consulted beside its bytes: the one
// the call was given, else the one noted by the hook it names (a hook found at the call's first
// graph brings its own then).
inline host_abort host_abort_of(ggml_abort_callback callback, void * data, const llama_cancel_hook * hook) {
    return callback != nullptr ? host_abort{callback, data} : hook_host_abort(hook);
}

} // namespace llama_cancel
