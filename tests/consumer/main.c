/* Built against the installed tree only: the header, the library and its dependencies resolve. */
#include <llama-cancel.h>

#include <stdio.h>
#include <string.h>

int main(void) {
    int8_t byte = 0;
    const bool before = llama_cancel_abort_callback(&byte);
    byte = 1;
    const bool after = llama_cancel_abort_callback(&byte);
    struct llama_cancel_decode_result r;
    const int32_t status = llama_cancel_decode(NULL, llama_batch_get_one(NULL, 0), NULL, &r, NULL);
    printf("reader: %d then %d; decode(NULL): %s (%s)\n", before, after, llama_cancel_status_str(status), r.message);
    /* The version string is the three numbers, as is the loaded library's version. */
    char numbers[32];
    snprintf(numbers, sizeof(numbers), "%d.%d.%d", LLAMA_CANCEL_VERSION_MAJOR, LLAMA_CANCEL_VERSION_MINOR,
             LLAMA_CANCEL_VERSION_PATCH);
    const int32_t v = llama_cancel_version();
    printf("version %s (string \"%s\", library %d)\n", numbers, LLAMA_CANCEL_VERSION_STRING, v);
    const bool version_ok = strcmp(numbers, LLAMA_CANCEL_VERSION_STRING) == 0 && v == LLAMA_CANCEL_VERSION;
    return (!before && after && status == LLAMA_CANCEL_ERROR && version_ok) ? 0 : 1;
}
