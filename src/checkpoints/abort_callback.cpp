// The byte reader that ggml's CPU backend calls after each graph node.
#include "llama-cancel.h"

#include "checkpoints/byte.h"

extern "C" bool llama_cancel_abort_callback(void * byte) {
    return llama_cancel::byte_is_set(static_cast<const int8_t *>(byte));
}
