#ifndef LLAMA_CANCEL_H
#define LLAMA_CANCEL_H

// llama-cancel: stop an in-flight llama.cpp computation from any thread by storing one byte.
//
// The byte is owned by the caller (a host's `malloc<Int8>(1)`, a ctypes c_int8, a C int8_t). Any
// thread stores a nonzero value into it to ask for a stop; the library only loads it (relaxed
// atomic loads). It keeps a byte's pointer while the call that received it runs, and a hook's
// (llama_cancel_hook_params.byte) until llama_cancel_hook_set_byte or llama_cancel_hook_free.
//
// Usage, on every backend (CPU, CUDA, Metal, Vulkan, RPC, BLAS); error checks left out:
//
//     static int8_t stop = 0;                  // any thread stores 1 to cancel
//     struct llama_model * model = llama_cancel_model_load(path, llama_model_default_params(), &stop, NULL);
//     struct llama_cancel_hook * hook = llama_cancel_hook_init(NULL);
//     struct llama_context_params cp = llama_context_default_params();
//     llama_cancel_hook_bind(hook, &cp);       // without a hook, a GPU's graph runs to its end
//     struct llama_context * ctx = llama_init_from_model(model, cp);
//
//     struct llama_cancel_decode_params dp = llama_cancel_decode_default_params();
//     dp.byte = &stop;                         // the hook bound to ctx is found by itself
//     struct llama_cancel_decode_result dr;
//     if (llama_cancel_decode(ctx, batch, &dp, &dr, NULL) == LLAMA_CANCEL_OK) {
//         const float * logits = llama_cancel_get_logits_ith(ctx, &dr, -1);
//     } else {
//         // CANCELLED: memory holds the first dr.n_committed batch tokens: decode from there to resume
//     }
//
//     llama_free(ctx);
//     llama_cancel_hook_free(hook);            // after the context it is bound to
//     llama_model_free(model);
//
// Threading: call each function on the thread that owns its context (a load: any one thread); other
// threads only store into the bytes and, during a decode, read seqs[s].cancelled (nothing else of
// a call's results is final before it returns).
//
// How soon a stop comes (targets, measured in docs/benchmark.md; mechanisms in docs/design.md): on
// the CPU within a node of the byte's store; elsewhere at the next checkpoint, about
// LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS of compute apart (at most a tenth of the graph on a Vulkan
// device emulated on the host's cores; about 100 round trips apart over RPC); a graph seen to fit
// in the interval has none and is read as it returns. dr.reach says what a decode's byte reached.
//
// Structs: fixed-width fields, pointers first, then 4-byte fields, `message` last, no padding on
// 64-bit targets. A host that copies a layout checks it with llama_cancel_struct_size/_field_offset.

#include "llama.h"

#include <stdbool.h>
#include <stdint.h>

// LLAMA_CANCEL_SHARED: the shared library (building or using it); LLAMA_CANCEL_BUILD: building
// the library. A static build exports its symbols too, so that a host's own shared library (a DLL
// on Windows) that links it whole exports the llama_cancel_* names its FFI binds by name.
#if defined(_WIN32)
#    if defined(LLAMA_CANCEL_BUILD)
#        define LLAMA_CANCEL_API __declspec(dllexport)
#    elif defined(LLAMA_CANCEL_SHARED)
#        define LLAMA_CANCEL_API __declspec(dllimport)
#    else
#        define LLAMA_CANCEL_API
#    endif
#elif defined(LLAMA_CANCEL_SHARED) || defined(LLAMA_CANCEL_BUILD)
#    define LLAMA_CANCEL_API __attribute__((visibility("default")))
#else
#    define LLAMA_CANCEL_API
#endif

// Semantic versioning: a host built against X.Y.Z runs on any library of MAJOR X and MINOR >= Y,
// with two exceptions a MINOR release may change, each change announced in CHANGELOG.md:
// - Experimental: the text-to-speech section (llama_cancel_tts_*, llama_cancel_mtmd_gen_audio_process
//   and their structs) stands on libmtmd's experimental audio generation (mtmd_gen_*), which
//   upstream changes between nightlies; its names and layouts may change. A host that copies its
//   layouts checks them with llama_cancel_struct_size/_field_offset at load, as for any struct.
// - Diagnostics: the Diagnostics section's functions and the result fields marked diagnostics
//   (decode_ret, n_decode_calls, budget_missed, longest_node_ms, embed n_calls) may count otherwise;
//   their layout holds. Hosts may ignore them.
// 2.0 changed names and layouts: CHANGELOG.md's migration table.
#define LLAMA_CANCEL_VERSION_MAJOR 2
#define LLAMA_CANCEL_VERSION_MINOR 0
#define LLAMA_CANCEL_VERSION_PATCH 0
#define LLAMA_CANCEL_VERSION \
    (LLAMA_CANCEL_VERSION_MAJOR * 10000 + LLAMA_CANCEL_VERSION_MINOR * 100 + LLAMA_CANCEL_VERSION_PATCH)
#define LLAMA_CANCEL_QUOTE(x)         #x
#define LLAMA_CANCEL_EXPAND_AND_QUOTE(x) LLAMA_CANCEL_QUOTE(x)
#define LLAMA_CANCEL_VERSION_STRING                                                                  \
    LLAMA_CANCEL_EXPAND_AND_QUOTE(LLAMA_CANCEL_VERSION_MAJOR.LLAMA_CANCEL_VERSION_MINOR.LLAMA_CANCEL_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

    enum llama_cancel_status {
        LLAMA_CANCEL_OK        =  0, // the whole request is done
        LLAMA_CANCEL_CANCELLED =  1, // a byte stopped it; memory holds exactly the committed part
        LLAMA_CANCEL_ERROR     = -1, // bad argument or a llama.cpp failure; `message` says which
    };

    //
    // Version and ABI (any thread, any time, no side effect)
    //

    // The loaded library's version, encoded as LLAMA_CANCEL_VERSION (1.0.0 = 10000).
    LLAMA_CANCEL_API int32_t llama_cancel_version(void);
    // sizeof a struct (by its C name) as the library was compiled; 0 if unknown. It knows every
    // struct of this header; llama.h's "llama_batch", "llama_model_params" and
    // "llama_context_params"; and, when built with libmtmd (llama_cancel_has_mtmd), mtmd.h's
    // "mtmd_input_text", "mtmd_gen_audio_info", "mtmd_gen_inp" and "mtmd_gen_out". llama.h's and
    // mtmd.h's are as in the headers the library was compiled against, which need not be the
    // loaded libllama's and libmtmd's.
    LLAMA_CANCEL_API int64_t llama_cancel_struct_size(const char * name);
    // Byte offset of `field` in struct `name`, for every field of every struct
    // llama_cancel_struct_size knows (compiled offsetof); -1 if unknown.
    LLAMA_CANCEL_API int64_t llama_cancel_field_offset(const char * name, const char * field);
    // Static name of a status ("ok", "cancelled", "error"); never NULL.
    LLAMA_CANCEL_API const char * llama_cancel_status_str(int32_t status);
    // True when built with libmtmd; without it the mtmd functions return LLAMA_CANCEL_ERROR.
    LLAMA_CANCEL_API bool llama_cancel_has_mtmd(void);

    //
    // The two callbacks FFI hosts bind by name, with the byte as user data
    //

    // ggml_abort_callback for llama_set_abort_callback(ctx, llama_cancel_abort_callback, byte): one
    // relaxed atomic load, nonzero = stop, NULL never stops. Backends whose registry takes an abort
    // callback (the CPU, after each node) call it on the decoding thread; llama_decode then returns
    // 2. On recurrent models that leaves a half-advanced state: llama_cancel_decode puts it back.
    LLAMA_CANCEL_API bool llama_cancel_abort_callback(void * byte);
    // ggml_backend_sched_eval_callback for llama_context_params.cb_eval or mtmd_context_params.cb_eval,
    // cb_eval_user_data = the byte: the one hook ggml runs on GPU-API, RPC and BLAS backends and in clip
    // encodes. Checkpoints about LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS of compute apart, on the same
    // nodes each time a graph runs again, none in a graph seen to fit in that (its byte is read as it
    // returns, or at the next graph's first node) (state kept per thread; docs/design.md#checkpoints). Beware: llama_decode and mtmd_encode_chunk return 0
    // after a graph it stopped; llama_cancel_decode and the mtmd functions report it as CANCELLED.
    LLAMA_CANCEL_API bool llama_cancel_eval_callback(struct ggml_tensor * t, bool ask, void * byte);

    //
    // Hook: the stateful eval callback (checkpoints placed by measured time, a chained cb_eval)
    //

#define LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS 10.0

    struct llama_cancel_hook; // opaque; one per context (llama_cancel_hook_bind refuses a second), used on its thread
    struct llama_cancel_hook_params {
        double                           interval_ms; // compute between checkpoints; <= 0: the default
        const int8_t *                   byte;        // byte read outside llama_cancel_* calls; NULL: none
        ggml_backend_sched_eval_callback chain;       // the caller's own cb_eval, asked about every node the hook is
                                                      // asked about (a stop's too; the scheduler asks no one about
                                                      // the nodes after a stop), told of the views it asked for; NULL: none
        void *                           chain_data;  // its user data
    };

    // Defaults: the default interval, no byte, no chain. Any thread.
    LLAMA_CANCEL_API struct llama_cancel_hook_params llama_cancel_hook_default_params(void);
    // New hook (params copied; NULL: defaults), owned by the caller; NULL when out of memory.
    LLAMA_CANCEL_API struct llama_cancel_hook * llama_cancel_hook_init(const struct llama_cancel_hook_params * params);
    // Frees it after the context bound to it was freed; NULL does nothing.
    LLAMA_CANCEL_API void llama_cancel_hook_free(struct llama_cancel_hook * hook);
    // Sets params->cb_eval/cb_eval_user_data to the hook before llama_init_from_model, and notes
    // params->abort_callback: the calls on that context consult it and put it back on return. False,
    // with nothing changed (params and hook), for NULL arguments, a cb_eval already set (chain it
    // through the hook's params) or a hook already bound into other params (one hook per context).
    // True, with nothing changed, for params that carry this hook already.
    LLAMA_CANCEL_API bool llama_cancel_hook_bind(struct llama_cancel_hook * hook, struct llama_context_params * params);
    // The callback itself, user data = the hook: for mtmd_context_params and other schedulers.
    LLAMA_CANCEL_API bool llama_cancel_hook_eval_callback(struct ggml_tensor * t, bool ask, void * hook);
    // Replaces the byte of hook_params.byte; only while no graph runs with the hook.
    LLAMA_CANCEL_API void llama_cancel_hook_set_byte(struct llama_cancel_hook * hook, const int8_t * byte);
    // True when the hook stopped the graph it ran last (its results are garbage: a host running a graph
    // itself checks this after it returns 0). A stop is the graph's own: it ends when the next graph
    // begins (a graph a host runs is recognised by its first node coming again), never cuts it.
    LLAMA_CANCEL_API bool llama_cancel_hook_stopped(const struct llama_cancel_hook * hook);
    // Clears that at once; learnt rates are kept.
    LLAMA_CANCEL_API void llama_cancel_hook_reset(struct llama_cancel_hook * hook);

    //
    // Cancellable decode
    //

    // Per-sequence data: arrays of params.n_seq entries, indexed by sequence id.
    struct llama_cancel_decode_params {
        const int8_t *             byte;                // the byte; NULL: never cancels
        struct llama_cancel_hook * hook;                // the hook bound to ctx (another: ERROR); NULL: found at its first ask
        ggml_abort_callback        abort_callback;      // the host's own, consulted too and installed on return; NULL: the hook's
        void *                     abort_callback_data; // its user data
        const int8_t * const *     seq_bytes;           // a byte per sequence (entries may be NULL): drops it alone; NULL: none
        float                      max_stop_ms;         // stop-time budget, ms; 0: none (docs/design.md#stop-time-budget)
        int32_t                    n_seq;               // entries of seq_bytes and of the `seqs` results; 0: none
    };

    struct llama_cancel_seq_result {
        int32_t n_committed; // this sequence's batch tokens now in memory
        int32_t output;      // after OK: index for llama_get_logits_ith of its last output; -1: none
        int32_t cancelled;   // 1 once its byte dropped it, stored (release order) at the drop
    };

    // Where a call's byte was read (the worst of its graphs; `reach` of every result): what a stop
    // waited for.
    enum llama_cancel_reach {
        LLAMA_CANCEL_REACH_GRAPH = 0, // inside every graph: a llama-cancel eval callback (hook or
                                      // stateless name) ran in it (or no graph ran)
        LLAMA_CANCEL_REACH_CPU   = 1, // the abort callback alone: the CPU's nodes stop, a GPU-API or
                                      // RPC device's split runs to its end; bind a hook. (BLAS: see below)
        LLAMA_CANCEL_REACH_CALLS = 2, // neither ran in a graph: the byte is read between graphs
    };
    // BLAS: ggml-blas computes its matrix products into the CPU's buffers and takes no abort
    // callback. Inside the library's calls its nodes count as the CPU's, hook or not: a stop waits
    // for the BLAS split in flight (its products, which no callback can interrupt) and comes at the
    // next CPU node (REACH_CPU without a hook, REACH_GRAPH with one; a hook adds no checkpoint there).

    struct llama_cancel_decode_result {
        int32_t status;          // enum llama_cancel_status, as returned
        int32_t n_committed;     // leading batch tokens in memory: resume from this batch index
        int32_t output_base;     // batch index of the last llama_decode call's first token; -1: not consecutive
        int32_t n_seq_cancelled; // sequences dropped by their byte
        int32_t reach;           // enum llama_cancel_reach
        // Diagnostics (see the versioning rule; hosts may ignore them):
        int32_t decode_ret;      // the last llama_decode's return (0 if not called)
        int32_t n_decode_calls;  // llama_decode calls made
        int32_t budget_missed;   // with max_stop_ms: 1 when a node outlasted the budget
        float   longest_node_ms; // with max_stop_ms: the longest CPU node or device checkpoint interval seen
        char    message[256];    // why, for LLAMA_CANCEL_ERROR; empty otherwise
    };

    // Defaults: everything NULL or 0. Any thread.
    LLAMA_CANCEL_API struct llama_cancel_decode_params llama_cancel_decode_default_params(void);
    // llama_decode(ctx, batch) under the byte: read by the abort callback (the CPU) and, with a
    // hook or the stateless eval callback bound, at checkpoints on every backend. On the ctx's
    // thread; the batch, params and results stay the caller's. `params` NULL: defaults; `result`
    // NULL: not reported; `seqs`: NULL or params->n_seq entries. The abort callback installed on ctx
    // on return is the host's (params->abort_callback, else the one its hook was bound with, else
    // none: llama.cpp cannot tell the library which one ctx had).
    // - OK: the whole batch is in memory; read outputs with llama_cancel_get_logits_ith.
    // - CANCELLED: memory holds exactly the first result->n_committed batch tokens (per sequence,
    //   seqs[s].n_committed), byte for byte what a clean decode of them leaves, on every memory kind;
    //   decode the batch from that index to resume, bit-identical (CPU). A stop keeps every finished
    //   ubatch before the one holding the batch's first output, whichever callback stopped it (a
    //   batch larger than n_ubatch goes a ubatch per llama_decode call up to there, then the rest in
    //   one call; inside that call the CPU's abort callback keeps finished ubatches of a KV cache).
    //   A byte set on entry: at once, nothing touched.
    // - Recurrent and hybrid models: a snapshot before each llama_decode call a stop could leave
    //   half-computed (not before generation steps, which run to their end): no host copy when ctx
    //   has an unused sequence id per sequence of the call (n_seq_max above those in use; hybrid
    //   models with kv_unified), which the call borrows and leaves empty (llama.cpp's graph then moves
    //   the state between cells on its own device); else a host copy, into params->hook's buffer
    //   (kept across calls) or one of the call's own. llama_cancel_hook_get_snapshot_stats counts them.
    // - A sequence's byte drops that sequence alone: it keeps its committed tokens, the others go on.
    // - ERROR: bad argument or llama_decode failure, result->message says which. An embeddings
    //   batch for an M-RoPE model needs batch.pos with 4 sections (t, y, x, z), as llama_decode does.
    // - result->reach: where the byte was read. REACH_CPU on a context with layers off the CPU, or
    //   REACH_CALLS, means stops there waited for whole graphs: bind a hook (llama_cancel_hook_bind).
    LLAMA_CANCEL_API int32_t llama_cancel_decode(struct llama_context * ctx, struct llama_batch batch,
        const struct llama_cancel_decode_params * params, struct llama_cancel_decode_result * result,
        struct llama_cancel_seq_result * seqs);
    // Output of batch index i (negative: -1 the batch's last output, as llama.cpp counts) after
    // llama_cancel_decode returned OK into `result`, on every path (hook, recurrent state, slices,
    // per-sequence drops) but one: where a dropped sequence left gaps among the last llama_decode
    // call's tokens (output_base -1) it is NULL for any index, negative ones too, and the others'
    // last outputs are read with llama_get_logits_ith(ctx, seqs[s].output). (Survivors whose tokens
    // of that call are consecutive, output_base >= 0, read by batch index.) NULL too when that output
    // does not exist and after CANCELLED or ERROR. Owned by ctx until its next decode; ctx's thread.
    LLAMA_CANCEL_API const float * llama_cancel_get_logits_ith(struct llama_context * ctx,
        const struct llama_cancel_decode_result * result, int32_t i);
    LLAMA_CANCEL_API const float * llama_cancel_get_embeddings_ith(struct llama_context * ctx,
        const struct llama_cancel_decode_result * result, int32_t i);
    // llama_encode(ctx, batch) under the byte, as llama_cancel_decode: for an encoder-decoder model
    // (T5) before its decodes, or an encoder-only one (BERT...) whose pooled outputs are then read with
    // llama_get_embeddings_seq. One graph over the whole batch (at most n_ubatch tokens; more: ERROR,
    // where llama.cpp would assert). OK: the encoder's output is in ctx. CANCELLED: nothing of this
    // encode is (n_committed 0); the context keeps the previous encode's output, which llama_decode
    // would use without a word: encode the batch again before decoding. Memory is never touched.
    // seq_bytes and max_stop_ms: ERROR. On the ctx's thread.
    LLAMA_CANCEL_API int32_t llama_cancel_encode(struct llama_context * ctx, struct llama_batch batch,
        const struct llama_cancel_decode_params * params, struct llama_cancel_decode_result * result);

    // llama_process(ctx, type, batch) (enum llama_process_type: ENCODE or DECODE, over llama.h's
    // opaque llama_batch_ext) under the byte, with the decode's params and result. The library cannot
    // read that batch, so a stop puts memory back to where it was before the call: every sequence's
    // positions, and on recurrent or hybrid models every sequence's state, copied first (a host copy
    // of all of them each call: llama_cancel_decode copies only its batch's, often none). OK
    // (n_committed -1: the whole batch); CANCELLED (n_committed 0, memory as before); ERROR (memory as
    // before). seq_bytes, n_seq and max_stop_ms need a readable batch: ERROR. On the ctx's thread.
    LLAMA_CANCEL_API int32_t llama_cancel_process(struct llama_context * ctx, int32_t type,
        struct llama_batch_ext * batch, const struct llama_cancel_decode_params * params,
        struct llama_cancel_decode_result * result);

    //
    // Embeddings and reranking (pooled outputs: llama_context_params.embeddings, a pooling type)
    //

    struct llama_cancel_embed_params {
        const int8_t *             byte;                // the byte; NULL: never cancels
        struct llama_cancel_hook * hook;                // the hook bound to ctx; NULL: found at its first ask
        ggml_abort_callback        abort_callback;      // the host's own, as in decode params; NULL: the hook's
        void *                     abort_callback_data; // its user data
    };

    struct llama_cancel_embed_result {
        int32_t status;       // enum llama_cancel_status, as returned
        int32_t n_committed;  // leading batch tokens whose sequences' rows are written: resume from this index
        int32_t n_seq_done;   // sequences whose rows this call wrote
        int32_t n_out;        // floats per row: llama_cancel_embed_n_out(ctx)
        int32_t reach;        // enum llama_cancel_reach: the worst of the call's graphs
        int32_t n_calls;      // diagnostics: llama_decode / llama_encode calls made
        char    message[256]; // why, for LLAMA_CANCEL_ERROR
    };

    // Defaults: everything NULL. Any thread.
    LLAMA_CANCEL_API struct llama_cancel_embed_params llama_cancel_embed_default_params(void);
    // Floats per sequence that ctx pools: llama_model_n_embd_out, or llama_model_n_cls_out for
    // LLAMA_POOLING_TYPE_RANK (rerankers' scores); 0 with pooling NONE or a NULL ctx. Any thread.
    LLAMA_CANCEL_API int32_t llama_cancel_embed_n_out(const struct llama_context * ctx);
    // The pooled outputs of every sequence of `batch` (the sequences one after another, each token in
    // one sequence, each sequence at most n_ubatch tokens; any number of tokens in all), written to
    // row s of `out` (out + s * n_out) for sequence id s: n_out_max floats hold every id's row. The
    // sequences go in groups of whole sequences of at most n_ubatch tokens, a llama_decode (or, for an
    // model with an encoder, llama_encode) per group, the byte read inside every graph and between
    // groups. OK: every row is written. CANCELLED: exactly the sequences of batch[0, n_committed)
    // have their rows (the others' rows are untouched), and memory holds what llama_decode leaves of
    // those groups (a KV model's finished groups; the stopped one rolled back); call again with the
    // batch from n_committed to resume: the rows are then an uninterrupted call's, bit for bit (CPU).
    // As in llama.cpp's embedding example, clear the sequences' memory before reusing their ids.
    // ERROR: bad argument (message), nothing decoded, or a llama.cpp failure. On the ctx's thread.
    LLAMA_CANCEL_API int32_t llama_cancel_embed(struct llama_context * ctx, struct llama_batch batch,
        const struct llama_cancel_embed_params * params, float * out, int64_t n_out_max,
        struct llama_cancel_embed_result * result);

    //
    // Token loop
    //

    enum llama_cancel_stop_reason {
        LLAMA_CANCEL_STOP_LENGTH    = 0, // n_predict tokens generated
        LLAMA_CANCEL_STOP_EOG       = 1, // the model produced an end-of-generation token (not in out)
        LLAMA_CANCEL_STOP_CANCELLED = 2, // the byte was set, or on_token returned false
        LLAMA_CANCEL_STOP_ERROR     = 3, // see result->message
    };

    // Called on the generating thread with each sampled token; false stops. Native code only.
    typedef bool (*llama_cancel_token_callback)(llama_token token, void * user_data);

    struct llama_cancel_generate_params {
        const int8_t *              byte;          // the byte; NULL: never cancels
        struct llama_cancel_hook *  hook;          // as in decode params; NULL: found at its first ask
        struct llama_sampler *      sampler;       // the caller's sampler chain; NULL: greedy
        llama_cancel_token_callback on_token;      // NULL: none
        void *                      on_token_data; // its user data
        float                       max_stop_ms;   // stop-time budget of every decode; 0: none
        int32_t                     n_predict;     // most tokens to generate (0: prompt only)
        int32_t                     seq_id;        // the sequence to continue
        int32_t                     n_batch;       // prompt tokens per decode; <= 0: the context's; more: ERROR
    };

    struct llama_cancel_generate_result {
        int32_t status;                // enum llama_cancel_status, as returned
        int32_t stop_reason;           // enum llama_cancel_stop_reason
        int32_t n_prompt_committed;    // prompt tokens now in memory
        int32_t n_generated;           // tokens written to out
        int32_t n_generated_committed; // of those, decoded into memory (n_generated or one fewer)
        int32_t n_past;                // next position of seq_id: where a resumed request goes on
        int32_t reach;                 // enum llama_cancel_reach: the worst of the call's decodes
        char    message[256];          // why, for LLAMA_CANCEL_ERROR
    };

    // Defaults: n_predict 32, sequence 0, greedy, the rest NULL or 0. Any thread.
    LLAMA_CANCEL_API struct llama_cancel_generate_params llama_cancel_generate_default_params(void);
    // Decodes `prompt` after what seq_id holds (n_prompt 0: go on from the last logits, as after
    // llama_cancel_mtmd_eval_chunks), then samples
    // and decodes up to n_predict tokens into `out` (n_out_max >= n_predict entries). The byte is read
    // inside every decode and between tokens; memory always holds whole, committed steps, and
    // result->n_past is seq_id's next position whatever the return (an ERROR in the checks decodes
    // nothing). Resume: prompt + n_prompt_committed while the prompt is not all in, then
    // out[n_generated_committed..n_generated) as the prompt. Returns OK (length or end of
    // generation), CANCELLED or ERROR. On the ctx's thread; `result` may be NULL.
    LLAMA_CANCEL_API int32_t llama_cancel_generate(struct llama_context * ctx, const llama_token * prompt,
        int32_t n_prompt, const struct llama_cancel_generate_params * params, llama_token * out,
        int32_t n_out_max, struct llama_cancel_generate_result * result);
    // Static name of a stop reason; never NULL.
    LLAMA_CANCEL_API const char * llama_cancel_stop_reason_str(int32_t reason);

    //
    // Cancellable model load
    //

    struct llama_cancel_load_result {
        int32_t status;       // enum llama_cancel_status
        char    message[256]; // why, when no model or context came back
    };

    // llama_model_load_from_file that stops when the byte is set (a progress callback reads it;
    // params.progress_callback is chained). The model (llama_model_free it), or NULL with status
    // CANCELLED or ERROR (missing or unreadable file, a folder, not GGUF, corrupt). Blocks the
    // calling thread; `result` may be NULL.
    LLAMA_CANCEL_API struct llama_model * llama_cancel_model_load(const char * path,
        struct llama_model_params params, const int8_t * byte, struct llama_cancel_load_result * result);

    //
    // Multimodal (mtmd): declared without mtmd.h, always defined
    //

    struct mtmd_context;
    struct mtmd_input_chunks;
    // mtmd_init_from_file with `mtmd_hook` (NULL: none) as cb_eval, n_threads (<= 0: mtmd's
    // default), use_gpu, the rest as mtmd_context_params_default(); the byte stops the projector load.
    // The context (mtmd_free it before the hook), or NULL with status and message. Hosts that fill
    // mtmd_context_params themselves set cb_eval and cb_eval_user_data the same way.
    LLAMA_CANCEL_API struct mtmd_context * llama_cancel_mtmd_init_from_file(const char * mmproj_path,
        const struct llama_model * text_model, struct llama_cancel_hook * mtmd_hook, int32_t n_threads,
        bool use_gpu, const int8_t * byte, struct llama_cancel_load_result * result);

#define LLAMA_CANCEL_MTMD_BATCH_ENCODE 1u // llama_cancel_mtmd_params.options: see llama_cancel_mtmd_eval_chunks

    struct llama_cancel_mtmd_params {
        const int8_t *             byte;        // the byte; NULL: never cancels
        struct llama_cancel_hook * hook;        // the hook bound to the llama context; NULL: found at its first ask
        struct llama_cancel_hook * mtmd_hook;   // the hook bound to the mtmd context; NULL: found at its first ask
        const int8_t * const *     seq_bytes;   // a byte per sequence, as in decode params; seq_id's stops it
        float                      max_stop_ms; // stop-time budget of the causal decodes; 0: none
        int32_t                    n_seq;       // entries of seq_bytes
        int32_t                    seq_id;      // the sequence the chunks go to
        int32_t                    n_batch;     // tokens per decode; <= 0: the context's; more: ERROR
        uint32_t                   options;     // LLAMA_CANCEL_MTMD_* bits; unknown bits: ERROR
        int32_t                    logits_last; // 1: logits for the last chunk's last token (llama_cancel_generate goes on from them)
    };

    struct llama_cancel_mtmd_result {
        int32_t status;        // enum llama_cancel_status, as returned
        int32_t n_chunks_done; // chunks in memory: resume with first_chunk = this
        int32_t n_past;        // next position of seq_id: resume with n_past = this
        int32_t reach;         // enum llama_cancel_reach: the worst of the llama context's decodes
        int32_t mtmd_reach;    // the same of the mtmd context's encodes: REACH_GRAPH with an eval callback of
                               // ours bound to mctx, else REACH_CALLS (read between chunks; bind mtmd_hook)
        char    message[256];  // why, for LLAMA_CANCEL_ERROR
    };

    // Defaults: sequence 0, the context's n_batch, logits_last 1, the rest NULL or 0. Any thread.
    LLAMA_CANCEL_API struct llama_cancel_mtmd_params llama_cancel_mtmd_default_params(void);
    // mtmd_helper_eval_chunks(chunks[first_chunk..], from n_past) under the byte: inside every encode
    // (through mtmd_hook, or the stateless callback bound to mctx), every decode and between chunks.
    // CANCELLED leaves exactly chunks [first_chunk, n_chunks_done) in memory (the stopped chunk is
    // removed whole, a garbage encode is never decoded); call again from n_chunks_done and n_past,
    // with the same options, to resume, bit-identical (CPU). ERROR keeps the same rule (a state
    // that could not be put back empties the sequence: 0 and 0). A hook given that is not the one
    // bound to its context: ERROR. Snapshots as in llama_cancel_decode, into params->hook's kept
    // buffer, counted in its snapshot stats. M-RoPE decoders (Qwen2-VL...) get upstream's 4
    // positions per media token; n_past advances by mtmd_input_chunk_get_n_pos. Then generate with
    // llama_cancel_generate(lctx, NULL, 0, ...): it goes on from the last token's logits.
    // BATCH_ENCODE: media chunks in a row that libmtmd batches (mtmd_batch_add_chunk: same-size
    // images, a batching projector) are one encode, from the run's first chunk (a call that resumes
    // inside a batch encodes it all again), then decoded and rolled back one by one.
    // On the thread that owns lctx and mctx; `params` NULL: defaults; `result` may be NULL.
    LLAMA_CANCEL_API int32_t llama_cancel_mtmd_eval_chunks(struct mtmd_context * mctx, struct llama_context * lctx,
        const struct mtmd_input_chunks * chunks, int32_t first_chunk, llama_pos n_past,
        const struct llama_cancel_mtmd_params * params, struct llama_cancel_mtmd_result * result);

    //
    // Text-to-speech (libmtmd's audio generation: Qwen3-TTS, Pocket-TTS). EXPERIMENTAL: names and
    // layouts of this section may change in a MINOR release (the versioning rule at the top).
    //
    // A generation is a chain of steps, each committed whole or, stopped, not at all: the voice
    // reference's encode, the prompt's decodes, then per frame (Qwen3-TTS) codebook 0 sampled from
    // the talker's logits, GEN_CODE (the code predictor's other codebooks) and the talker's decode of
    // the feedback embedding, or (Pocket-TTS) GEN_CODE (end-of-speech head and flow step) and the
    // backbone's decode of its latent; every `window` frames GEN_WAV (code2wav, the mimi decoder)
    // turns the frames into PCM with a streaming state; a Pocket-TTS text chunk's end rewinds the
    // backbone to the voice prefix and decodes the next chunk. CANCELLED leaves the generation at its
    // last committed step (talker memory, streaming state, frames, PCM); llama_cancel_tts_generate
    // again resumes from there, and the PCM is the uninterrupted run's bit for bit (CPU). A frame's
    // GEN_CODE (tens of ms) checkpoints half the hook's interval apart (5 ms by default), so that a
    // stop there lands within the interval; every other graph at the whole interval. A GEN_CODE call
    // (here or in llama_cancel_mtmd_gen_audio_process) whose last one of the same graph on the same
    // hook (the stateless callback: thread) finished within that half interval runs without
    // checkpoints (its asks cost a third), and the byte is read as it returns: set, the call is
    // CANCELLED as at a checkpoint.
    //
    // Hooks: `hook` is the one bound to lctx, `mtmd_hook` the one bound to mctx (its cb_eval), as in
    // llama_cancel_mtmd_params; NULL: found at its first ask; another: ERROR.
    //
    // Randomness: libmtmd reseeds GEN_CODE's sampler only when the seed differs from the previous
    // call's, and a stopped call still draws. So the object gives GEN_CODE call g the seed
    // mix(seed, g), reseeding first when the previous call had that seed: a frame's draws depend on
    // the seed and its index alone. (llama-tts passes one seed to every call: other codes, same model.)
    //
    // Codebook 0 (Qwen3-TTS) is sampled from the codec's 2048 codes and end of speech only, less the
    // tokens the model suppresses (tokenizer.ggml.suppress_tokens); a pick outside them (a chain
    // that took a -inf candidate) is an ERROR at GEN_CODE before anything of that frame is kept.

    struct mtmd_bitmap;
    struct mtmd_gen_inp;
    struct mtmd_gen_out;
    struct llama_cancel_tts; // opaque: one generation (its prompt, frames, streaming state and PCM)

    struct llama_cancel_tts_params {
        const char *               text;       // the utterance, UTF-8, copied at init; required
        const char *               lang;       // Qwen3-TTS language ("en" or "english", ...); NULL: english
        const struct mtmd_bitmap * voice;      // voice reference audio for the mmproj's speaker encoder; NULL: none
        struct llama_sampler *     sampler;    // Qwen3-TTS codebook 0: the caller's chain (NULL: greedy), used until free;
                                               // it gets every token but the codec's codes and end of speech at -inf
                                               // (so what the model suppresses too), as llama.cpp's sampling does
        float                      top_p;      // GEN_CODE sampling; <= 0: the pipeline's default
        float                      temp;       // GEN_CODE temperature or noise scale; <= 0: the pipeline's default
        int32_t                    top_k;      // GEN_CODE sampling; <= 0: the pipeline's default
        uint32_t                   seed;       // GEN_CODE's draws (see above); UINT32_MAX: one drawn at init
        int32_t                    seq_id;     // the backbone's sequence; must be empty at init
        int32_t                    n_batch;    // prompt rows per decode; <= 0: the context's; more: ERROR
        int32_t                    max_frames; // frames in all; <= 0: until end of speech or a full context
        int32_t                    window;     // frames per GEN_WAV; <= 0: the pipeline's (Qwen3-TTS 72, Pocket-TTS 8)
    };

    // After each committed frame (n_frames in all, n_samples of PCM so far), on the generating
    // thread, between steps (no graph runs): false stops the call (CANCELLED, the frame kept). A
    // managed host's function works where its runtime lets that thread call it (ctypes, koffi).
    typedef bool (*llama_cancel_tts_frame_callback)(int32_t n_frames, int64_t n_samples, void * user_data);

    struct llama_cancel_tts_run_params {
        const int8_t *                  byte;          // the byte; NULL: never cancels
        struct llama_cancel_hook *      hook;          // the hook bound to lctx; NULL: found at its first ask
        struct llama_cancel_hook *      mtmd_hook;     // the hook bound to mctx; NULL: found at its first ask
        llama_cancel_tts_frame_callback on_frame;      // NULL: none
        void *                          on_frame_data; // its user data
        float                           max_stop_ms;   // stop-time budget of the backbone's decodes; 0: none
        int32_t                         n_frames;      // most frames this call adds; <= 0: to the end
    };

    enum llama_cancel_tts_step {
        LLAMA_CANCEL_TTS_STEP_NONE     = 0, // no step stopped or failed
        LLAMA_CANCEL_TTS_STEP_VOICE    = 1, // the voice reference's encode
        LLAMA_CANCEL_TTS_STEP_PROMPT   = 2, // a prompt decode (a Pocket-TTS text chunk's too)
        LLAMA_CANCEL_TTS_STEP_GEN_CODE = 3, // a GEN_CODE graph
        LLAMA_CANCEL_TTS_STEP_BACKBONE = 4, // a frame's backbone decode
        LLAMA_CANCEL_TTS_STEP_GEN_WAV  = 5, // a GEN_WAV graph
        LLAMA_CANCEL_TTS_STEP_BETWEEN  = 6, // between steps (the byte seen there, or on_frame)
    };

    struct llama_cancel_tts_result {
        int64_t n_samples;        // PCM samples in the generation so far (llama_cancel_tts_get_pcm)
        int32_t status;           // enum llama_cancel_status, as returned
        int32_t stop_reason;      // enum llama_cancel_stop_reason: LENGTH, EOG (end of speech), CANCELLED, ERROR
        int32_t step;             // enum llama_cancel_tts_step that stopped (CANCELLED) or failed (ERROR)
        int32_t n_frames;         // frames committed in all
        int32_t n_frames_pending; // of those, frames whose PCM the next GEN_WAV makes
        int32_t n_chunks_done;    // text chunks done (Pocket-TTS splits long texts); a finished generation's last counts
        int32_t sample_rate;      // of the PCM, Hz
        int32_t finished;         // 1 once the generation is over: generate returns OK at once
        int32_t reach;            // enum llama_cancel_reach: the worst of this call's backbone decodes (lctx)
        int32_t mtmd_reach;       // the same of its GEN_CODE, GEN_WAV and voice graphs (mctx): REACH_GRAPH with an
                                  // eval callback of ours bound to mctx, else REACH_CALLS (read between steps)
        char    message[256];     // why, for LLAMA_CANCEL_ERROR
    };

    // Defaults: english, greedy codebook 0, the pipeline's sampling, seed 1, sequence 0, the
    // context's n_batch, no frame limit, the pipeline's window. Any thread.
    LLAMA_CANCEL_API struct llama_cancel_tts_params llama_cancel_tts_default_params(void);
    // Defaults: everything NULL or 0. Any thread.
    LLAMA_CANCEL_API struct llama_cancel_tts_run_params llama_cancel_tts_run_default_params(void);
    // A generation on lctx (the pipeline's backbone, embeddings on: llama_context_params.embeddings)
    // and mctx (a generation projector: mtmd_gen_audio_get_info type QWEN3TTS or POCKETTTS). Checks
    // everything and builds the prompt rows; decodes and encodes nothing. The object (free it before
    // lctx and mctx), or NULL with result->status ERROR and message. On the thread of lctx and mctx.
    LLAMA_CANCEL_API struct llama_cancel_tts * llama_cancel_tts_init(struct llama_context * lctx,
        struct mtmd_context * mctx, const struct llama_cancel_tts_params * params,
        struct llama_cancel_tts_result * result);
    // Frees it; the backbone's sequence keeps what it holds. NULL does nothing.
    LLAMA_CANCEL_API void llama_cancel_tts_free(struct llama_cancel_tts * tts);
    // Runs the generation on from where it is, up to params->n_frames frames more or its end, the
    // byte read inside every graph (the backbone's through lctx's hook or the stateless callback,
    // GEN_CODE and GEN_WAV through mctx's cb_eval; without one bound there, between steps only),
    // between frames and between windows. OK: n_frames more, or the end (finished 1, stop_reason EOG
    // or LENGTH; every frame then in the PCM). CANCELLED: the generation holds its committed steps
    // (result->step says which one stopped); call again to resume. ERROR: result->message; the
    // generation keeps its committed steps too. On the thread of lctx and mctx; `params` NULL:
    // defaults; `result` may be NULL.
    LLAMA_CANCEL_API int32_t llama_cancel_tts_generate(struct llama_cancel_tts * tts,
        const struct llama_cancel_tts_run_params * params, struct llama_cancel_tts_result * result);
    // GEN_WAV of the frames not yet in the PCM (result->n_frames_pending), now: for a host that
    // ends a stopped generation and wants all its audio. A generation flushed this way is finished
    // (its later windows could not be the uninterrupted run's). OK, CANCELLED (nothing changed) or ERROR.
    LLAMA_CANCEL_API int32_t llama_cancel_tts_flush(struct llama_cancel_tts * tts,
        const struct llama_cancel_tts_run_params * params, struct llama_cancel_tts_result * result);
    // The PCM so far (mono floats at result->sample_rate), *n_samples of them; owned by tts, valid
    // until its next generate, flush or free; NULL with 0 when none. Any thread while no call runs.
    LLAMA_CANCEL_API const float * llama_cancel_tts_get_pcm(const struct llama_cancel_tts * tts, int64_t * n_samples);

    // One libmtmd generation step for a host that runs its own TTS loop.
    struct llama_cancel_gen_audio_params {
        const int8_t *             byte;      // the byte; NULL: never cancels
        struct llama_cancel_hook * mtmd_hook; // the hook bound to mctx; NULL: found at its first ask
    };

    struct llama_cancel_gen_audio_result {
        int32_t status;       // enum llama_cancel_status, as returned
        int32_t step;         // LLAMA_CANCEL_TTS_STEP_GEN_CODE or _GEN_WAV (inp->type), or NONE when OK
        int32_t reach;        // enum llama_cancel_reach of the graph: REACH_GRAPH with an eval callback of ours
                              // bound to mctx, else REACH_CALLS (read before it runs)
        char    message[256]; // why, for LLAMA_CANCEL_ERROR
    };

    // mtmd_gen_audio_process(mctx, inp, out) under params->byte: CANCELLED when the byte stopped its
    // graph (libmtmd returns 0 with garbage then: *out is zeroed, the caller's state_data stays
    // valid, call again to resume; a stopped GEN_CODE drew from clip's sampler, so the same draws
    // need a call with another seed first), OK with *out libmtmd's (owned by mctx until its next
    // call), or ERROR. On mctx's thread; `params` NULL: no byte; `result` may be NULL.
    LLAMA_CANCEL_API int32_t llama_cancel_mtmd_gen_audio_process(struct mtmd_context * mctx,
        const struct mtmd_gen_inp * inp, struct mtmd_gen_out * out,
        const struct llama_cancel_gen_audio_params * params, struct llama_cancel_gen_audio_result * result);

    //
    // Diagnostics: how the checkpoints and snapshots went (benchmarks, tuning); hosts may ignore them.
    // With the result fields marked diagnostics above, what a MINOR release may count otherwise.
    //

    struct llama_cancel_hook_stats {
        uint64_t checkpoints;   // checkpoints passed (each one backend synchronize)
        uint64_t asks;          // nodes asked about
        double   work_flops;    // work between checkpoints now (last device asked)
        double   interval_ms;   // checkpoint interval in force there (RPC stretches it, a max_stop_ms caps it)
        double   round_trip_ms; // an RPC checkpoint's measured round trip; 0 elsewhere
    };

    // Recurrent-state snapshots of the llama_cancel_* calls made with a hook (models with recurrent
    // or hybrid memory only): one per llama_decode call that a stop could leave half-computed.
    struct llama_cancel_snapshot_stats {
        uint64_t snapshots;  // states kept, one per such call (all its sequences at once)
        uint64_t shared;     // of those, kept without a host copy: shared with spare sequence ids
        uint64_t held_steps; // llama_decode calls run to their end instead (at most a token per sequence)
        uint64_t restores;   // snapshots put back after a stop
        uint64_t bytes;      // bytes the other snapshots copied, in all
        double   copy_ms;    // time those copies took, in all
    };

    // Counters since init, by value; zeros for NULL. On the thread of the hook's context.
    LLAMA_CANCEL_API struct llama_cancel_hook_stats llama_cancel_hook_get_stats(const struct llama_cancel_hook * hook);
    // Snapshot counters of the decodes made with the hook since init, by value; zeros for NULL. On
    // the thread of the hook's context. The hook keeps its largest snapshot's buffer (bytes /
    // snapshots per call) until freed.
    LLAMA_CANCEL_API struct llama_cancel_snapshot_stats llama_cancel_hook_get_snapshot_stats(const struct llama_cancel_hook * hook);

#ifdef __cplusplus
}
#endif

#endif // LLAMA_CANCEL_H
