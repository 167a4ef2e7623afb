// llama_cancel_mtmd_init_from_file: an mtmd context created with the eval-callback hook bound, its
// projector load stopped by the caller's byte, and a readable reason for every NULL.
#include "llama-cancel.h"

#include "abi/abi_guard.h"
#include "checkpoints/byte.h"
#include "load/gguf_file.h"
#include "abi/status.h"

#include "mtmd.h"

#include <cstring>

namespace {

using llama_cancel::fail_null;

mtmd_context * init(const char * path, const llama_model * model, llama_cancel_hook * hook, int32_t n_threads,
                    bool use_gpu, const int8_t * byte, llama_cancel_load_result * r) {
    if (path == nullptr) {
        return fail_null(r, LLAMA_CANCEL_ERROR, "mmproj path is NULL");
    }
    if (model == nullptr) {
        return fail_null(r, LLAMA_CANCEL_ERROR, "text model is NULL");
    }
    if (llama_cancel::byte_is_set(byte)) {
        return fail_null(r, LLAMA_CANCEL_CANCELLED, "cancelled before loading %s", path);
    }
    char why[256];
    if (!llama_cancel::check_gguf_file(path, why, sizeof(why))) {
        return fail_null(r, LLAMA_CANCEL_ERROR, "%s", why);
    }

    mtmd_context_params mp = mtmd_context_params_default();
    mp.use_gpu = use_gpu;
    if (n_threads > 0) {
        mp.n_threads = n_threads;
    }
    llama_cancel::load_progress progress{byte, mp.progress_callback, mp.progress_callback_user_data};
    mp.progress_callback           = llama_cancel::load_progress::on_progress;
    mp.progress_callback_user_data = &progress;
    if (hook != nullptr) {
        mp.cb_eval           = llama_cancel_hook_eval_callback;
        mp.cb_eval_user_data = hook;
    }
    // mtmd's warmup only reserves compute memory (no graph runs, the hook is not asked).
    mtmd_context * mctx = mtmd_init_from_file(path, model, mp);
    if (mctx == nullptr) {
        if (progress.cancelled) {
            return fail_null(r, LLAMA_CANCEL_CANCELLED, "loading %s was cancelled", path);
        }
        if (progress.chain_stopped) {
            return fail_null(r, LLAMA_CANCEL_CANCELLED, "loading %s was stopped by the caller's progress callback", path);
        }
        return fail_null(r, LLAMA_CANCEL_ERROR,
                         "libmtmd could not load %s for this text model (wrong n_embd, unsupported or corrupt "
                         "projector; its log says why)", path);
    }
    if (r != nullptr) {
        r->status = LLAMA_CANCEL_OK;
    }
    return mctx;
}

} // namespace

extern "C" mtmd_context * llama_cancel_mtmd_init_from_file(const char * mmproj_path, const llama_model * text_model,
                                                           llama_cancel_hook * mtmd_hook, int32_t n_threads,
                                                           bool use_gpu, const int8_t * byte,
                                                           llama_cancel_load_result * result) {
    if (result != nullptr) {
        std::memset(result, 0, sizeof(*result));
    }
    return llama_cancel::abi_guard(result, static_cast<mtmd_context *>(nullptr), [&] {
        return init(mmproj_path, text_model, mtmd_hook, n_threads, use_gpu, byte, result);
    });
}
