// What both file loads share (llama_cancel_model_load, llama_cancel_mtmd_init_from_file): the
// GGUF file check that llama.cpp and libmtmd would only log, and the progress callback that reads
// the caller's byte in front of the caller's own.
#pragma once

#include <cstddef>
#include <cstdint>

namespace llama_cancel {

// True when `path` names a regular, readable file that starts with GGUF's magic. Otherwise false,
// with the reason in `message` (`size` bytes): "cannot open PATH: <strerror>", "PATH is a folder,
// not a GGUF file", "PATH is not a regular file" or "PATH is not a GGUF file (N bytes, no GGUF magic)".
bool check_gguf_file(const char * path, char * message, size_t size);

// A load's progress callback (llama.cpp's and libmtmd's have the same signature): stops the load
// when the byte is set, and otherwise asks the caller's own callback, if any.
struct load_progress {
    using callback = bool (*)(float progress, void * user_data);

    const int8_t * byte;
    callback       chain      = nullptr;
    void *         chain_data = nullptr;
    bool           cancelled     = false; // the byte stopped the load
    bool           chain_stopped = false; // the caller's own progress callback did

    // The function to install, with `this` as its user data.
    static bool on_progress(float progress, void * user_data);
};

} // namespace llama_cancel
