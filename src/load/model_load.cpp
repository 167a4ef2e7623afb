// llama_cancel_model_load: llama_model_load_from_file that the caller's byte can stop, with a
// readable reason for every NULL.
#include "llama-cancel.h"

#include "abi/abi_guard.h"
#include "checkpoints/byte.h"
#include "load/gguf_file.h"
#include "abi/status.h"

#include <cstring>

namespace {

using llama_cancel::fail_null;

llama_model * load(const char * path, llama_model_params params, const int8_t * byte,
                   llama_cancel_load_result * result) {
    if (path == nullptr) {
        return fail_null(result, LLAMA_CANCEL_ERROR, "model path is NULL");
    }
    if (llama_cancel::byte_is_set(byte)) {
        return fail_null(result, LLAMA_CANCEL_CANCELLED, "cancelled before loading %s", path);
    }
    char why[256];
    if (!llama_cancel::check_gguf_file(path, why, sizeof(why))) {
        return fail_null(result, LLAMA_CANCEL_ERROR, "%s", why);
    }
    llama_cancel::load_progress progress{byte, params.progress_callback, params.progress_callback_user_data};
    params.progress_callback           = llama_cancel::load_progress::on_progress;
    params.progress_callback_user_data = &progress;
    llama_model * model = llama_model_load_from_file(path, params);
    if (model != nullptr) {
        if (result != nullptr) {
            result->status = LLAMA_CANCEL_OK;
        }
        return model;
    }
    if (progress.cancelled) {
        return fail_null(result, LLAMA_CANCEL_CANCELLED, "loading %s was cancelled", path);
    }
    if (progress.chain_stopped) {
        return fail_null(result, LLAMA_CANCEL_CANCELLED, "loading %s was stopped by the caller's progress callback",
                         path);
    }
    return fail_null(result, LLAMA_CANCEL_ERROR,
                "llama.cpp could not load %s: truncated, corrupt or unsupported model (its log says why)", path);
}

} // namespace

extern "C" llama_model * llama_cancel_model_load(const char * path, llama_model_params params, const int8_t * byte,
                                                 llama_cancel_load_result * result) {
    if (result != nullptr) {
        std::memset(result, 0, sizeof(*result));
    }
    return llama_cancel::abi_guard(result, static_cast<llama_model *>(nullptr),
                                   [&] { return load(path, params, byte, result); });
}
