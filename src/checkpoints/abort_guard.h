// The abort callback of a call on a llama context: installed for the call's duration (the call's
// bytes, a budget's node clock, the host's own callback consulted), then the host's put back,
// however the call ends. llama.cpp has no getter for a context's abort callback: the host's is the
// one the call was given, else the one in the context params its hook was bound into.
#pragma once

#include "checkpoints/call.h"
#include "checkpoints/hook.h"

#include "llama.h"

namespace llama_cancel {

class abort_guard {
  public:
    // `host_callback` / `host_data`: the caller's own (params->abort_callback), or NULL.
    abort_guard(llama_context * ctx, call & c, ggml_abort_callback host_callback, void * host_data)
        : ctx_(ctx), call_(c), host_(host_callback), host_data_(host_data) {
        llama_set_abort_callback(ctx_, call_abort_callback, &c);
    }
    ~abort_guard() {
        if (host_ != nullptr) {
            llama_set_abort_callback(ctx_, host_, host_data_);
        } else {
            const host_abort bound = hook_host_abort(call_.hook); // the hook found at the first graph too
            llama_set_abort_callback(ctx_, bound.callback, bound.data);
        }
    }
    abort_guard(const abort_guard &) = delete;
    abort_guard & operator=(const abort_guard &) = delete;

  private:
    llama_context *     ctx_;
    const call &        call_;
    ggml_abort_callback host_;
    void *              host_data_;
};

} // namespace llama_cancel
