// llama_cancel_model_load: llama_model_load_from_file that the caller's byte can stop, with a
// readable reason for every NULL.
#include "llama-cancel.h"

#include "flag.h"
#include "status.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <sys/stat.h>

namespace {

struct load_progress {
    const int8_t *          flag;
    llama_progress_callback chain;
    void *                  chain_data;
    bool                    cancelled;
};

// llama.cpp calls this while it reads tensors; false aborts the load (it then returns NULL).
bool progress_callback(float progress, void * user_data) {
    auto * p = static_cast<load_progress *>(user_data);
    if (llama_cancel::flag_is_set(p->flag)) {
        p->cancelled = true;
        return false;
    }
    return p->chain == nullptr || p->chain(progress, p->chain_data);
}

template <typename... Args>
llama_model * fail(llama_cancel_load_result * result, int32_t status, const char * fmt, Args... args) {
    llama_cancel::set_status(result, status, fmt, args...);
    return nullptr;
}

// The checks llama.cpp would only log: the file exists, is readable and starts with GGUF's magic.
bool check_file(const char * path, llama_cancel_load_result * result) {
    struct stat st{};
    if (stat(path, &st) != 0) {
        fail(result, LLAMA_CANCEL_ERROR, "cannot open model file %s: %s", path, std::strerror(errno));
        return false;
    }
    if (!S_ISREG(st.st_mode)) {
        fail(result, LLAMA_CANCEL_ERROR, "model path %s is not a regular file", path);
        return false;
    }
    FILE * f = std::fopen(path, "rb");
    if (f == nullptr) {
        fail(result, LLAMA_CANCEL_ERROR, "cannot open model file %s: %s", path, std::strerror(errno));
        return false;
    }
    char magic[4] = {0, 0, 0, 0};
    const size_t n = std::fread(magic, 1, sizeof(magic), f);
    std::fclose(f);
    if (n != sizeof(magic) || std::memcmp(magic, "GGUF", 4) != 0) {
        fail(result, LLAMA_CANCEL_ERROR, "%s is not a GGUF file (%zu bytes, no GGUF magic)", path,
             static_cast<size_t>(st.st_size));
        return false;
    }
    return true;
}

llama_model * load(const char * path, llama_model_params params, const int8_t * flag,
                   llama_cancel_load_result * result) {
    if (path == nullptr) {
        return fail(result, LLAMA_CANCEL_ERROR, "model path is NULL");
    }
    if (llama_cancel::flag_is_set(flag)) {
        return fail(result, LLAMA_CANCEL_CANCELLED, "cancelled before loading %s", path);
    }
    if (!check_file(path, result)) {
        return nullptr;
    }
    load_progress progress{flag, params.progress_callback, params.progress_callback_user_data, false};
    params.progress_callback           = progress_callback;
    params.progress_callback_user_data = &progress;
    llama_model * model = llama_model_load_from_file(path, params);
    if (model != nullptr) {
        if (result != nullptr) {
            result->status = LLAMA_CANCEL_OK;
        }
        return model;
    }
    if (progress.cancelled) {
        return fail(result, LLAMA_CANCEL_CANCELLED, "loading %s was cancelled", path);
    }
    return fail(result, LLAMA_CANCEL_ERROR,
                "llama.cpp could not load %s: truncated, corrupt or unsupported model (its log says why)", path);
}

} // namespace

extern "C" llama_model * llama_cancel_model_load(const char * path, llama_model_params params, const int8_t * flag,
                                                 llama_cancel_load_result * result) {
    if (result != nullptr) {
        std::memset(result, 0, sizeof(*result));
    }
    try {
        return load(path, params, flag, result);
    } catch (const std::exception & e) {
        return fail(result, LLAMA_CANCEL_ERROR, "internal error: %s", e.what());
    }
}
