// llama_cancel_process: llama_process over an opaque llama_batch_ext under the caller's bytes. The
// batch's tokens cannot be read, so a stop puts memory back to where it was before the call: every
// sequence's positions, and on recurrent or hybrid models every sequence's state, noted first.
#include "llama-cancel.h"

#include "abi/abi_guard.h"
#include "checkpoints/abort_guard.h"
#include "checkpoints/byte.h"
#include "checkpoints/call.h"
#include "checkpoints/hook.h"
#include "decode/memory_snapshot.h"
#include "abi/status.h"

#include <cstdio>
#include <cstring>
#include <numeric>
#include <vector>

namespace {

using llama_cancel::fail;

bool check_params(llama_context * ctx, llama_batch_ext * batch, int32_t type, const llama_cancel_decode_params & p,
                  llama_cancel_decode_result * result) {
    if (ctx == nullptr || batch == nullptr) {
        fail(result, "%s", "ctx or batch is NULL");
        return false;
    }
    if (type != LLAMA_PROCESS_TYPE_ENCODE && type != LLAMA_PROCESS_TYPE_DECODE) {
        fail(result, "type is %d; it must be LLAMA_PROCESS_TYPE_ENCODE or _DECODE", type);
        return false;
    }
    if (p.seq_bytes != nullptr || p.n_seq != 0 || p.max_stop_ms != 0.0f) {
        fail(result, "%s", "seq_bytes, n_seq and max_stop_ms need a batch the library can read: llama_cancel_decode");
        return false;
    }
    return true;
}

int32_t process(llama_context * ctx, int32_t type, llama_batch_ext * batch, const llama_cancel_decode_params & p,
                llama_cancel_decode_result * result) {
    if (!check_params(ctx, batch, type, p, result)) {
        return LLAMA_CANCEL_ERROR;
    }
    if (llama_cancel::byte_is_set(p.byte)) {
        llama_cancel::set_status(result, LLAMA_CANCEL_CANCELLED, "%s", "");
        return LLAMA_CANCEL_CANCELLED;
    }
    // Every sequence as it is: positions always, the state too where a stop could leave it half
    // advanced (an encode never touches memory).
    const bool encode = type == LLAMA_PROCESS_TYPE_ENCODE;
    std::vector<llama_seq_id> all(llama_n_seq_max(ctx));
    std::iota(all.begin(), all.end(), 0);
    llama_cancel::memory_snapshot snapshot;
    const bool with_state = !encode && llama_cancel::memory_snapshot::needs_state(ctx);
    if (!encode && !snapshot.capture(ctx, all, with_state, false)) {
        return fail(result, "%s", "could not copy the recurrent state before the call");
    }
    llama_cancel::call c;
    c.byte            = p.byte;
    c.hook            = p.hook;
    const llama_cancel::host_abort host = llama_cancel::host_abort_of(p.abort_callback, p.abort_callback_data, p.hook);
    c.abort_callback  = host.callback;
    c.abort_data      = host.data;
    c.abort_installed = true;
    int32_t ret = 0;
    {
        llama_cancel::call_scope  scope(c);
        llama_cancel::abort_guard guard(ctx, c, p.abort_callback, p.abort_callback_data);
        c.begin_graph();
        ret = llama_process(ctx, static_cast<llama_process_type>(type), batch);
        llama_synchronize(ctx); // a GPU API computes on past the return: the policy times the end
        c.graph_returned(false); // the opaque batch does not tell whether outputs were read
    }
    result->decode_ret     = ret;
    result->n_decode_calls = 1;
    result->reach          = c.graph_reach();
    if (c.wrong_hook) {
        snapshot.restore(ctx, nullptr);
        return fail(result, "%s", "params.hook is not the hook bound to this context; nothing was processed");
    }
    const bool stopped = (ret == 0 && c.eval_stopped) || ret == 2;
    if (ret == 0 && !stopped) {
        result->status      = LLAMA_CANCEL_OK;
        result->n_committed = -1; // all of the batch, whose size the library cannot read
        return LLAMA_CANCEL_OK;
    }
    if (!encode && !snapshot.restore(ctx, nullptr)) {
        return fail(result, "%s", "could not restore the memory after the stop; the sequences that failed were cleared");
    }
    if (stopped) {
        result->status = LLAMA_CANCEL_CANCELLED;
        return LLAMA_CANCEL_CANCELLED;
    }
    return fail(result, "llama_process returned %d (memory put back as before the call)", ret);
}

} // namespace

extern "C" int32_t llama_cancel_process(llama_context * ctx, int32_t type, llama_batch_ext * batch,
                                        const llama_cancel_decode_params * params, llama_cancel_decode_result * result) {
    llama_cancel_decode_result own;
    llama_cancel_decode_result * r = result != nullptr ? result : &own;
    std::memset(r, 0, sizeof(*r));
    const llama_cancel_decode_params p = params != nullptr ? *params : llama_cancel_decode_default_params();
    return llama_cancel::abi_guard(r, static_cast<int32_t>(LLAMA_CANCEL_ERROR),
                                   [&] { return process(ctx, type, batch, p, r); });
}
