/* The host's own library (llamadart's native library, say): its code uses llama-cancel directly. */
#include "llama-cancel.h"

int host_cancel_version(void) {
    return llama_cancel_version();
}
