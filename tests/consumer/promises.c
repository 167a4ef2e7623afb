/* The header's five promises a host relies on (issue 30), through the exported API of the installed
 * library alone, on the CPU: usage: promises MODEL. Prints one line per promise; exit 0 when all hold. */
#include <llama-cancel.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_TOK = 128, N_UBATCH = 32 };

static int g_failed = 0;
static void check(int ok, const char * what) {
    printf("%s: %s\n", ok ? "holds" : "BROKEN", what);
    g_failed |= !ok;
}

/* A host's own abort callback that counts its calls. */
static bool count_cb(void * data) {
    ++*(int *) data;
    return false;
}

/* A host's cb_eval, chained behind the hook or the stateless callback: stores 1 into `byte` at ask
 * number `at`. */
struct trigger {
    int       asks, at;
    int8_t *  byte;
};
static bool trigger_cb(struct ggml_tensor * t, bool ask, void * data) {
    (void) t;
    struct trigger * tr = data;
    if (ask && ++tr->asks == tr->at) {
        atomic_store_explicit((_Atomic int8_t *) tr->byte, 1, memory_order_relaxed);
    }
    return !ask || false;
}
/* The stateless contract name alone as cb_eval, the trigger storing its byte first. */
static bool stateless_cb(struct ggml_tensor * t, bool ask, void * data) {
    struct trigger * tr = data;
    trigger_cb(t, ask, data);
    return llama_cancel_eval_callback(t, ask, tr->byte);
}

static struct llama_context * context(struct llama_model * m, struct llama_context_params cp) {
    cp.n_ctx = 512, cp.n_batch = N_TOK, cp.n_ubatch = N_UBATCH, cp.n_threads = cp.n_threads_batch = 2;
    return llama_init_from_model(m, cp);
}

/* Tokens 0..n-1 of sequence `seq` at positions 0..n-1, the last one's output (and `extra`'s, >= 0). */
static void fill(struct llama_batch * b, int first, int n, llama_seq_id seq, int extra) {
    for (int i = 0; i < n; ++i) {
        const int k = first + i;
        b->token[k] = 3 + (k * 7 + seq) % 200, b->pos[k] = i, b->n_seq_id[k] = 1, b->seq_id[k][0] = seq;
        b->logits[k] = i == n - 1 || i == extra;
    }
    b->n_tokens = first + n;
}

int main(int argc, char ** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL\n", argv[0]);
        return 2;
    }
    llama_backend_init();
    ggml_backend_load_all();
    struct llama_model * model = llama_cancel_model_load(argv[1], llama_model_default_params(), NULL, NULL);
    if (model == NULL) {
        return 2;
    }
    struct llama_batch b = llama_batch_init(N_TOK, 0, 1);
    int8_t byte = 0;
    struct llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.byte = &byte;
    struct llama_cancel_decode_result r;

    /* 1. The host's abort callback, set at creation and handed over with the hook, stays. */
    int host_calls = 0;
    struct llama_cancel_hook * hook = llama_cancel_hook_init(NULL);
    struct llama_context_params cp = llama_context_default_params();
    cp.abort_callback = count_cb, cp.abort_callback_data = &host_calls;
    llama_cancel_hook_bind(hook, &cp);
    struct llama_context * ctx = context(model, cp);
    fill(&b, 0, 16, 0, -1);
    llama_cancel_decode(ctx, b, &p, &r, NULL);
    const int during = host_calls;
    fill(&b, 0, 16, 0, -1);
    for (int i = 0; i < 16; ++i) b.pos[i] += 16;
    llama_decode(ctx, b);
    check(during > 0 && host_calls > during, "the host's abort callback is consulted and installed again");
    llama_free(ctx);
    llama_cancel_hook_free(hook);

    /* 2. A hook's stop belongs to its graph: the next call, hook not named, byte at 0, is OK. */
    struct trigger tr = {0, 5, &byte};
    struct llama_cancel_hook_params hp = llama_cancel_hook_default_params();
    hp.chain = trigger_cb, hp.chain_data = &tr;
    hook = llama_cancel_hook_init(&hp);
    cp = llama_context_default_params();
    llama_cancel_hook_bind(hook, &cp);
    ctx = context(model, cp);
    fill(&b, 0, 32, 0, -1);
    const int32_t stopped = llama_cancel_decode(ctx, b, &p, &r, NULL);
    /* 4. After CANCELLED no output exists, by negative index either. */
    check(stopped == LLAMA_CANCEL_CANCELLED && llama_cancel_get_logits_ith(ctx, &r, -1) == NULL,
          "after a stop, index -1 reads nothing");
    byte = 0, tr.at = -1;
    const int32_t again = llama_cancel_decode(ctx, b, &p, &r, NULL);
    check(stopped == LLAMA_CANCEL_CANCELLED && again == LLAMA_CANCEL_OK &&
          llama_memory_seq_pos_max(llama_get_memory(ctx), 0) == 31, "a hook's stop does not stick to the next call");

    /* 5. Per-sequence bytes, none set, hook named: outputs readable by batch index. */
    llama_free(ctx);
    cp = llama_context_default_params();
    cp.n_seq_max = 2;
    llama_cancel_hook_bind(hook, &cp);
    ctx = context(model, cp);
    fill(&b, 0, 64, 0, 40);
    fill(&b, 64, 64, 1, 40);
    int8_t b0 = 0, b1 = 0;
    const int8_t * flags[2] = {&b0, &b1};
    struct llama_cancel_decode_params ps = p;
    ps.hook = hook, ps.seq_bytes = flags, ps.n_seq = 2;
    struct llama_cancel_seq_result seqs[2];
    const int32_t st = llama_cancel_decode(ctx, b, &ps, &r, seqs);
    const int readable = st == LLAMA_CANCEL_OK && llama_cancel_get_logits_ith(ctx, &r, 40) != NULL &&
                         llama_cancel_get_logits_ith(ctx, &r, 63) != NULL &&
                         llama_cancel_get_logits_ith(ctx, &r, 104) != NULL &&
                         llama_cancel_get_logits_ith(ctx, &r, 127) != NULL;
    check(readable, "with per-sequence bytes every output is read by batch index");
    llama_free(ctx);
    llama_cancel_hook_free(hook);

    /* 3. The stateless name alone: a stop in the third ubatch of a prefill keeps the first two. */
    struct trigger st3 = {0, 0, &byte};
    cp = llama_context_default_params();
    cp.cb_eval = stateless_cb, cp.cb_eval_user_data = &st3;
    ctx = context(model, cp);
    fill(&b, 0, N_TOK, 0, -1);
    byte = 0, st3.at = -1;
    struct llama_context * probe = context(model, cp); /* asks of one ubatch */
    fill(&b, 0, N_UBATCH, 0, -1);
    llama_cancel_decode(probe, b, &p, &r, NULL);
    const int per_ubatch = st3.asks;
    llama_free(probe);
    st3.asks = 0, st3.at = 2 * per_ubatch + per_ubatch / 2;
    fill(&b, 0, N_TOK, 0, -1);
    const int32_t s3 = llama_cancel_decode(ctx, b, &p, &r, NULL);
    check(s3 == LLAMA_CANCEL_CANCELLED && r.n_committed == 2 * N_UBATCH &&
          llama_memory_seq_pos_max(llama_get_memory(ctx), 0) == 2 * N_UBATCH - 1,
          "the stateless callback alone keeps the finished ubatches");
    llama_free(ctx);

    llama_batch_free(b);
    llama_model_free(model);
    return g_failed ? 1 : 0;
}
