/* The FFI side of a llamadart-shaped host, in C: like Dart's DynamicLibrary.open and lookupFunction,
 * it opens the host's one shared library by path and finds every function by name there, linking
 * neither llama-cancel nor llama.cpp (the headers give types only). It binds every function the
 * header declares with LLAMA_CANCEL_API (read from the header file itself), then runs a cancel
 * through the bound names alone: a decode of several ubatches that the byte stops half-way (stored
 * by the caller's abort callback at a chosen graph node), CANCELLED with memory holding exactly
 * n_committed tokens, then the resume, whose last logits equal a clean decode's bit for bit.
 * usage: ffi_loader LIBHOST HEADER MODEL */
#include "llama-cancel.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_TOKENS  64
#define N_UBATCH  16
#define MAX_NAMES 128

static void * g_lib;

static void fail(const char * what, const char * detail) {
    printf("FAIL: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

static void * need(const char * name) {
    void * sym = dlsym(g_lib, name);
    if (sym == NULL) {
        fail("not found by name in the host library", name);
    }
    return sym;
}

/* A pointer of the declared function's own type, found by name: p_NAME. */
#define BIND(name) __typeof__(&name) p_##name = (__typeof__(&name)) need(#name)

/* The names declared with LLAMA_CANCEL_API, as a binding generator reads the header: preprocessor
 * lines left out, each use of the macro followed by a declaration whose name stands before its
 * first '('. Returns how many; every use of the macro must give one. */
static int header_names(const char * path, char names[][64]) {
    FILE * f = fopen(path, "r");
    if (f == NULL) {
        fail("cannot read the header", path);
    }
    static char text[1 << 18];
    size_t      len = 0;
    char        line[1024];
    while (fgets(line, sizeof(line), f) != NULL) {
        const char * s = line + strspn(line, " \t");
        const size_t n = strlen(line);
        if (*s != '#' && len + n < sizeof(text)) {
            memcpy(text + len, line, n);
            len += n;
        }
    }
    fclose(f);
    text[len] = '\0';
    int          count = 0;
    const char * macro = "LLAMA_CANCEL_API";
    for (const char * at = strstr(text, macro); at != NULL; at = strstr(at + 1, macro)) {
        const char * paren = strchr(at, '(');
        const char * end   = paren;
        while (end > at && (end[-1] == ' ' || end[-1] == '*')) {
            end--;
        }
        const char * start = end;
        while (start > at && (start[-1] == '_' || (start[-1] >= 'a' && start[-1] <= 'z') ||
                              (start[-1] >= '0' && start[-1] <= '9'))) {
            start--;
        }
        const size_t n = (size_t) (end - start);
        if (paren == NULL || n == 0 || n >= 64 || strncmp(start, "llama_cancel_", 13) != 0 || count == MAX_NAMES) {
            fail("a LLAMA_CANCEL_API declaration this parser cannot read", at);
        }
        memcpy(names[count], start, n);
        names[count][n] = '\0';
        count++;
    }
    return count;
}

/* The caller's own abort callback: counts its calls and, at call `at`, stores the byte, as another
 * thread's store would land at that node. */
struct store_at {
    int      calls;
    int      at;
    int8_t * byte;
};

static void quiet(enum ggml_log_level level, const char * text, void * data) {
    (void) level;
    (void) text;
    (void) data;
}

static bool store_at_call(void * data) {
    struct store_at * s = data;
    if (++s->calls == s->at) {
        *s->byte = 1;
    }
    return false;
}

int main(int argc, char ** argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: ffi_loader LIBHOST HEADER MODEL\n");
        return 2;
    }
    g_lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (g_lib == NULL) {
        fail("dlopen", dlerror());
    }
    static char names[MAX_NAMES][64];
    const int   n_names = header_names(argv[2], names);
    for (int i = 0; i < n_names; i++) {
        need(names[i]);
    }
    printf("bound all %d LLAMA_CANCEL_API functions of the header by name in %s\n", n_names, argv[1]);

    BIND(llama_cancel_version);
    BIND(llama_cancel_struct_size);
    BIND(llama_cancel_status_str);
    BIND(llama_cancel_model_load);
    BIND(llama_cancel_hook_init);
    BIND(llama_cancel_hook_bind);
    BIND(llama_cancel_hook_free);
    BIND(llama_cancel_hook_get_stats);
    BIND(llama_cancel_decode_default_params);
    BIND(llama_cancel_decode);
    BIND(llama_cancel_get_logits_ith);
    BIND(ggml_backend_load_all);
    BIND(llama_log_set);
    BIND(llama_backend_init);
    BIND(llama_model_default_params);
    BIND(llama_context_default_params);
    BIND(llama_init_from_model);
    BIND(llama_model_get_vocab);
    BIND(llama_vocab_n_tokens);
    BIND(llama_batch_init);
    BIND(llama_batch_free);
    BIND(llama_get_memory);
    BIND(llama_memory_clear);
    BIND(llama_memory_seq_pos_max);
    BIND(llama_free);
    BIND(llama_model_free);

    if (p_llama_cancel_version() != LLAMA_CANCEL_VERSION ||
        p_llama_cancel_struct_size("llama_cancel_decode_params") != (int64_t) sizeof(struct llama_cancel_decode_params) ||
        p_llama_cancel_struct_size("llama_cancel_decode_result") != (int64_t) sizeof(struct llama_cancel_decode_result)) {
        fail("version or layouts differ from this header", NULL);
    }

    p_llama_log_set(quiet, NULL);
    p_ggml_backend_load_all();
    p_llama_backend_init();
    int8_t                          stop = 0;
    struct llama_cancel_load_result lr;
    struct llama_model * model = p_llama_cancel_model_load(argv[3], p_llama_model_default_params(), &stop, &lr);
    if (model == NULL) {
        fail("model load", lr.message);
    }
    struct llama_cancel_hook *  hook = p_llama_cancel_hook_init(NULL);
    struct llama_context_params cp   = p_llama_context_default_params();
    cp.n_ctx                         = 256;
    cp.n_batch                       = N_TOKENS;
    cp.n_ubatch                      = N_UBATCH;
    cp.n_threads = cp.n_threads_batch = 2;
    if (hook == NULL || !p_llama_cancel_hook_bind(hook, &cp)) {
        fail("hook", NULL);
    }
    struct llama_context * ctx     = p_llama_init_from_model(model, cp);
    const int32_t          n_vocab = p_llama_vocab_n_tokens(p_llama_model_get_vocab(model));
    if (ctx == NULL) {
        fail("context", NULL);
    }
    struct llama_batch batch = p_llama_batch_init(N_TOKENS, 0, 1);
    for (int i = 0; i < N_TOKENS; i++) {
        batch.token[i]     = 3 + i % 50;
        batch.pos[i]       = i;
        batch.n_seq_id[i]  = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i]    = i == N_TOKENS - 1;
    }
    batch.n_tokens = N_TOKENS;

    struct store_at                   trigger = {0, -1, &stop};
    struct llama_cancel_decode_params dp      = p_llama_cancel_decode_default_params();
    dp.byte                                   = &stop;
    dp.hook                                   = hook;
    dp.abort_callback                         = store_at_call;
    dp.abort_callback_data                    = &trigger;
    struct llama_cancel_decode_result r;

    /* 1. A clean decode: the reference logits, and how many abort-callback calls it makes. */
    int32_t st = p_llama_cancel_decode(ctx, batch, &dp, &r, NULL);
    const float * logits = p_llama_cancel_get_logits_ith(ctx, &r, N_TOKENS - 1);
    if (st != LLAMA_CANCEL_OK || logits == NULL || trigger.calls < 4) {
        fail("clean decode", r.message);
    }
    float * reference = malloc(sizeof(float) * (size_t) n_vocab);
    memcpy(reference, logits, sizeof(float) * (size_t) n_vocab);
    const int calls = trigger.calls;
    p_llama_memory_clear(p_llama_get_memory(ctx), true);

    /* 2. The byte stored half-way through the same decode. */
    trigger.calls = 0;
    trigger.at    = calls / 2;
    st            = p_llama_cancel_decode(ctx, batch, &dp, &r, NULL);
    const llama_pos pos_max = p_llama_memory_seq_pos_max(p_llama_get_memory(ctx), 0);
    printf("stop at abort-callback call %d of %d: %s, n_committed %d of %d, memory holds positions 0..%d\n",
           trigger.at, calls, p_llama_cancel_status_str(st), r.n_committed, N_TOKENS, pos_max);
    if (st != LLAMA_CANCEL_CANCELLED || r.n_committed <= 0 || r.n_committed >= N_TOKENS ||
        r.n_committed % N_UBATCH != 0 || pos_max != r.n_committed - 1) {
        fail("the cancel did not leave exactly n_committed tokens in memory", NULL);
    }

    /* 3. The resume from n_committed: the same last logits as the clean decode, bit for bit. */
    const int32_t      k      = r.n_committed;
    struct llama_batch rest   = batch;
    rest.n_tokens             = N_TOKENS - k;
    rest.token               += k;
    rest.pos                 += k;
    rest.n_seq_id            += k;
    rest.seq_id              += k;
    rest.logits              += k;
    stop                      = 0;
    trigger.at                = -1;
    st                        = p_llama_cancel_decode(ctx, rest, &dp, &r, NULL);
    logits                    = p_llama_cancel_get_logits_ith(ctx, &r, rest.n_tokens - 1);
    const bool same           = logits != NULL && memcmp(logits, reference, sizeof(float) * (size_t) n_vocab) == 0;
    struct llama_cancel_hook_stats hs = p_llama_cancel_hook_get_stats(hook);
    printf("resume: %s, last logits %s the clean decode's; hook: %llu asks, %llu checkpoints\n",
           p_llama_cancel_status_str(st), same ? "equal to" : "DIFFER from", (unsigned long long) hs.asks,
           (unsigned long long) hs.checkpoints);
    if (st != LLAMA_CANCEL_OK || !same || hs.asks == 0) {
        fail("resume", r.message);
    }

    free(reference);
    p_llama_batch_free(batch);
    p_llama_free(ctx);
    p_llama_cancel_hook_free(hook);
    p_llama_model_free(model);
    puts("ok");
    return 0;
}
