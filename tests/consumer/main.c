/* Built against the installed tree only: the header, the library and its dependencies resolve. */
#include <llama-cancel.h>

#include <stdio.h>

int main(void) {
    int8_t byte = 0;
    const bool before = llama_cancel_abort_callback(&byte);
    byte = 1;
    const bool after = llama_cancel_abort_callback(&byte);
    struct llama_cancel_decode_result r;
    const int32_t status = llama_cancel_decode(NULL, llama_batch_get_one(NULL, 0), NULL, &r, NULL);
    printf("reader: %d then %d; decode(NULL): %s (%s)\n", before, after, llama_cancel_status_str(status), r.message);
    return (!before && after && status == LLAMA_CANCEL_ERROR) ? 0 : 1;
}
