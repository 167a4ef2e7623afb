/* Loads the host library by path and binds llama-cancel by name in it, as Dart FFI, ctypes or koffi
 * do: the version and struct sizes match this header, and the mtmd functions answer as the build
 * says. usage: ffi_loader LIBHOST EXPECT_MTMD(0|1) */
#include "llama-cancel.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int32_t (*version_fn)(void);
typedef int64_t (*size_fn)(const char *);
typedef bool (*has_mtmd_fn)(void);
typedef int32_t (*eval_chunks_fn)(struct mtmd_context *, struct llama_context *, const struct mtmd_input_chunks *,
                                  int32_t, llama_pos, const struct llama_cancel_mtmd_params *,
                                  struct llama_cancel_mtmd_result *);

static void * need(void * lib, const char * name) {
    void * sym = dlsym(lib, name);
    if (sym == NULL) {
        printf("FAIL: %s is not exported by the host library\n", name);
        exit(1);
    }
    return sym;
}

int main(int argc, char ** argv) {
    if (argc < 3) {
        return 2;
    }
    void * lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        printf("FAIL: %s\n", dlerror());
        return 1;
    }
    const int expect_mtmd = atoi(argv[2]);
    const int32_t version = ((version_fn) need(lib, "llama_cancel_version"))();
    const int64_t params = ((size_fn) need(lib, "llama_cancel_struct_size"))("llama_cancel_decode_params");
    const bool has_mtmd = ((has_mtmd_fn) need(lib, "llama_cancel_has_mtmd"))();
    need(lib, "llama_cancel_decode");
    need(lib, "llama_cancel_abort_callback");
    struct llama_cancel_mtmd_result r;
    const int32_t st = ((eval_chunks_fn) need(lib, "llama_cancel_mtmd_eval_chunks"))(NULL, NULL, NULL, 0, 0, NULL, &r);
    printf("host library: version %d, decode params %lld bytes, mtmd %d, mtmd_eval_chunks(NULL): %d '%s'\n",
           version, (long long) params, has_mtmd, st, r.message);
    const bool mtmd_answer_ok = expect_mtmd ? strstr(r.message, "NULL") != NULL
                                            : strcmp(r.message, "built without libmtmd") == 0;
    const bool ok = version == LLAMA_CANCEL_VERSION && params == (int64_t) sizeof(struct llama_cancel_decode_params) &&
                    has_mtmd == (expect_mtmd != 0) && st == LLAMA_CANCEL_ERROR && mtmd_answer_ok;
    puts(ok ? "ok" : "FAIL");
    return ok ? 0 : 1;
}
