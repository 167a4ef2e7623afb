// The byte reader that ggml's CPU backend calls after each graph node.
#include "llama-cancel.h"

#include "flag.h"

extern "C" bool llama_cancel_abort_callback(void * flag) {
    return llama_cancel::flag_is_set(static_cast<const int8_t *>(flag));
}
