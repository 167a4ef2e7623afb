// The GGUF file check and the load progress callback of src/load/gguf_file.h.
#include "load/gguf_file.h"

#include "checkpoints/byte.h"
#include "ggml.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

bool llama_cancel::check_gguf_file(const char * path, char * message, size_t size) {
    // std::filesystem with an error code: portable (no POSIX stat) and no exception.
    namespace fs = std::filesystem;
    std::error_code       ec;
    const fs::file_status st = fs::status(fs::u8path(path), ec);
    if (ec) {
        std::snprintf(message, size, "cannot open %s: %s", path, ec.message().c_str());
        return false;
    }
    if (fs::is_directory(st)) {
        std::snprintf(message, size, "%s is a folder, not a GGUF file", path);
        return false;
    }
    if (!fs::is_regular_file(st)) {
        std::snprintf(message, size, "%s is not a regular file", path);
        return false;
    }
    const uintmax_t file_size = fs::file_size(fs::u8path(path), ec);
    FILE * f = ggml_fopen(path, "rb"); // UTF-8 paths on Windows too, as llama.cpp opens them
    if (f == nullptr) {
        std::snprintf(message, size, "cannot open %s: %s", path, std::strerror(errno));
        return false;
    }
    char         magic[4] = {0, 0, 0, 0};
    const size_t n        = std::fread(magic, 1, sizeof(magic), f);
    std::fclose(f);
    if (n != sizeof(magic) || std::memcmp(magic, "GGUF", 4) != 0) {
        std::snprintf(message, size, "%s is not a GGUF file (%llu bytes, no GGUF magic)", path,
                      static_cast<unsigned long long>(ec ? 0 : file_size));
        return false;
    }
    return true;
}

// llama.cpp and libmtmd call this while they read tensors; false aborts the load (NULL then).
bool llama_cancel::load_progress::on_progress(float progress, void * user_data) {
    auto * p = static_cast<load_progress *>(user_data);
    if (byte_is_set(p->byte)) {
        p->cancelled = true;
        return false;
    }
    if (p->chain != nullptr && !p->chain(progress, p->chain_data)) {
        p->chain_stopped = true;
        return false;
    }
    return true;
}
