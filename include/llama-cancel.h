#ifndef LLAMA_CANCEL_H
#define LLAMA_CANCEL_H

// llama-cancel: stop an in-flight llama.cpp computation from any thread by storing one byte.
//
// The byte is owned by the caller (a host's `malloc<Int8>(1)`, a ctypes c_int8, a C int8_t). Any
// thread stores a nonzero value into it to ask for a stop; the functions here only load it, with
// relaxed atomic loads, never write it, and never keep the pointer past the call that received it
// (the callbacks keep it as long as the caller leaves them installed).
//
// Usage (error checks left out):
//
//     static int8_t stop = 0;                   // any thread: __atomic_store_n(&stop, 1, __ATOMIC_RELAXED)
//     ggml_backend_load_all();
//     struct llama_model * model = llama_cancel_model_load(path, llama_model_default_params(), &stop, NULL);
//     struct llama_cancel_hook * hook = llama_cancel_hook_init(NULL);
//     struct llama_context_params cp = llama_context_default_params();
//     llama_cancel_hook_bind(hook, &cp);        // the byte then reaches GPU, RPC and BLAS backends too
//     struct llama_context * ctx = llama_init_from_model(model, cp);
//
//     struct llama_cancel_decode_params dp = llama_cancel_decode_default_params();
//     dp.flag = &stop;
//     dp.hook = hook;
//     struct llama_cancel_decode_result dr;
//     if (llama_cancel_decode(ctx, batch, &dp, &dr, NULL, 0) == LLAMA_CANCEL_CANCELLED) {
//         // memory holds the first dr.n_committed tokens: resume from there, or drop them
//     }
//
//     struct llama_cancel_generate_params gp = llama_cancel_generate_default_params();
//     gp.flag = &stop;
//     gp.hook = hook;
//     llama_token out[32];
//     struct llama_cancel_generate_result gr;
//     llama_cancel_generate(ctx, prompt, n_prompt, &gp, out, 32, &gr);  // gr.n_generated tokens in out
//
//     llama_free(ctx);
//     llama_cancel_hook_free(hook);             // after every context it is bound to
//     llama_model_free(model);
//
// Threading: call each function on the thread that owns its context (or, for a load, any one
// thread); the only thing other threads do is store into the byte, at any time.

#include "llama.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// LLAMA_CANCEL_SHARED: the shared library (building or using it); LLAMA_CANCEL_BUILD: building
// the library, shared or static. A static build keeps its symbols visible, so that a host's own
// shared library that links it whole exports the llama_cancel_* names its FFI binds by name.
#if defined(_WIN32) && !defined(__MINGW32__)
#    if defined(LLAMA_CANCEL_SHARED) && defined(LLAMA_CANCEL_BUILD)
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

// The version of this header. MINOR grows with each release that adds to the API, PATCH with fixes;
// while MAJOR is 0, a MINOR change may also change a struct's layout (the sizes below tell).
#define LLAMA_CANCEL_VERSION_MAJOR 0
#define LLAMA_CANCEL_VERSION_MINOR 4
#define LLAMA_CANCEL_VERSION_PATCH 0
#define LLAMA_CANCEL_VERSION \
    (LLAMA_CANCEL_VERSION_MAJOR * 10000 + LLAMA_CANCEL_VERSION_MINOR * 100 + LLAMA_CANCEL_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

    //
    // Version and ABI: what a host that copied the layouts checks before the first call
    //

    // The version of the library actually loaded, encoded as LLAMA_CANCEL_VERSION (0.4.0 = 400).
    // A host written against header X.Y.Z needs MAJOR X and MINOR >= Y (while X is 0: MINOR Y).
    // Any thread, any time; no side effect.
    LLAMA_CANCEL_API int32_t llama_cancel_version(void);

    // sizeof the named struct as the loaded library was compiled: every public struct of this header
    // by its C name ("llama_cancel_decode_params", "llama_cancel_decode_result", ...), and the
    // llama.h structs the API passes by value or pointer ("llama_batch", "llama_model_params",
    // "llama_context_params") as the library saw them. 0 for a name it does not know, or NULL.
    // FFI hosts (Dart ffigen, ctypes, koffi) compare it with the size of their own copy of the layout,
    // so that a field added or moved shows as a clear error at load instead of corrupted memory.
    // Any thread, any time; the name is only read during the call.
    LLAMA_CANCEL_API size_t llama_cancel_struct_size(const char * name);

    // Byte offset of field `field` in struct `name` (one of this header's structs) as the loaded
    // library was compiled; -1 for an unknown struct or field, or NULL. With it a host checks every
    // field it declares, not just the total size. Any thread, any time.
    LLAMA_CANCEL_API int64_t llama_cancel_field_offset(const char * name, const char * field);

    // Name of field number `i` (0-based, in declaration order) of struct `name` (one of this
    // header's structs), or NULL past the last one or for an unknown struct. A host walks it to find
    // the fields its copy lacks: a field added where padding hid it leaves the size unchanged.
    // Static string; any thread, any time.
    LLAMA_CANCEL_API const char * llama_cancel_field_name(const char * name, int32_t i);

    // True when the library was built with libmtmd: the multimodal functions below work. Without it
    // they exist all the same and return LLAMA_CANCEL_ERROR, "built without libmtmd". Any thread,
    // any time.
    LLAMA_CANCEL_API bool llama_cancel_has_mtmd(void);

    //
    // Callbacks
    //

    // A ggml_abort_callback for llama_set_abort_callback(ctx, llama_cancel_abort_callback, flag).
    // Returns true (stop) when the byte at `flag` is nonzero: one relaxed atomic load, nothing else.
    // A NULL `flag` never stops. ggml calls it on the CPU backend only, after each graph node, on
    // the thread that called llama_decode; llama_decode then returns 2 and drops the positions of
    // the ubatch it was computing (earlier ubatches stay in memory). Beware on models with recurrent
    // state (llama_model_is_recurrent / llama_model_is_hybrid): the stopped ubatch has already
    // advanced that state in place and llama.cpp cannot undo it, so after a 2 the sequence holds a
    // half-advanced state. llama_cancel_decode puts it back exactly.
    LLAMA_CANCEL_API bool llama_cancel_abort_callback(void * flag);

    // Deprecated, kept so that code naming it still builds: llama_cancel_eval_callback no longer
    // places a checkpoint after each node of this many estimated FLOPs (see below).
#define LLAMA_CANCEL_EVAL_NODE_WORK 1.0e9

    // A ggml_backend_sched_eval_callback for llama_context_params.cb_eval or
    // mtmd_context_params.cb_eval, with the byte as cb_eval_user_data: the stateless form, for hosts
    // that bind callbacks by name. It is the only hook that reaches GPU-API, RPC and BLAS backends
    // and clip encodes. ggml's scheduler asks about nodes before computing them and synchronizes the
    // backend after each node answered true (a checkpoint); at a checkpoint this returns false (stop)
    // when the byte is nonzero (on the RPC backend, whose synchronize does not wait, it first reads
    // one byte of the node). It places checkpoints as llama_cancel_hook does: by the work (estimated
    // FLOPs) done since the last one, against a budget adapted to the compute rate it measures, so
    // that they fall about LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS of compute apart on slow and fast
    // devices alike, whatever the node sizes; and at once when the byte is already set while the
    // scheduler is still grouping nodes. A stop therefore comes within about that interval, or
    // within the node in flight when one node takes longer (no node is interrupted). On ggml-vulkan,
    // whose synchronize sleeps only through views of 10 nodes or more, a view may run past its
    // interval to reach 10 nodes, while it stays within a tenth of the last graph's work there, so
    // that the host thread sleeps instead of spinning (a stop then takes up to about a tenth of the
    // graph; no such extension under llama_cancel_decode_params.max_stop_ms).
    // Cost: a clock read per node, and one backend synchronize per checkpoint (about one per
    // interval of compute, and a few more while a device's rate is being learnt). A NULL `flag`
    // never stops and places no checkpoint.
    // State: none in the binding, so any number of contexts may share it. What it measures is kept
    // per thread (ggml's scheduler calls it on the thread that computes the graph, the one that
    // called llama_decode or mtmd_encode_chunk) and per device (the node's buffer's device; the CPU
    // and BLAS share one): the work since the last checkpoint carries over to the thread's next
    // graph, and a rate learnt on a device serves later graphs there. The first graphs a thread
    // computes on a device use a default budget until its rate is measured. Time between decodes,
    // however long, is not taken for compute.
    // Beware: after a stop the scheduler still runs the graph's later splits and llama_decode
    // returns 0 with half-computed logits and KV cells (mtmd_encode_chunk returns 0 with garbage
    // embeddings). Treat a call that returns with the byte set as stopped: discard its positions
    // (llama_memory_seq_rm) and outputs. Or decode through llama_cancel_decode (with or without a
    // llama_cancel_hook): it learns on the decoding thread that this callback stopped the graph,
    // rolls back exactly what the stop left and returns LLAMA_CANCEL_CANCELLED, never success.
    LLAMA_CANCEL_API bool llama_cancel_eval_callback(struct ggml_tensor * t, bool ask, void * flag);

    //
    // Eval-callback hook: the stateful form
    //

    // Default target compute time between two checkpoints.
#define LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS 10.0f

    // Opaque. Places checkpoints by work done since the previous one, with a FLOP budget that adapts
    // to the rate measured at each checkpoint so that they fall about `interval_ms` apart on any
    // device; records whether it stopped a graph; chains the caller's own eval callback.
    struct llama_cancel_hook;

    struct llama_cancel_hook_params {
        const int8_t * flag;        // caller-owned byte, nonzero = stop; NULL never stops
        float          interval_ms; // target compute time between checkpoints (<= 0: the default)
        // The caller's own eval callback (debug dumps, imatrix, TTS...), or NULL. It is asked about
        // every node until a stop: once the byte is set (or the graph was stopped) the hook answers
        // alone and the chain sees no more asks in that graph. A node it asks for becomes a
        // checkpoint; its false at ask = false stops the graph.
        ggml_backend_sched_eval_callback chain;
        void *                           chain_data;
    };

    struct llama_cancel_hook_stats {
        uint64_t checkpoints;  // checkpoints passed since init (each one a backend synchronize)
        uint64_t asks;         // nodes asked about since init
        double   budget_flops; // current work budget between checkpoints (of the device last asked about)
        bool     stopped;      // the hook stopped a graph since the last reset
        // Of the device last asked about: the checkpoint interval in force, ms (the hook's interval,
        // lengthened so that checkpoints cost about 1% of the compute where each is a network round
        // trip, but to no more than a quarter of the last graph's compute, and capped by a decode's
        // stop-time budget), and that round trip as measured, ms (0 where a checkpoint is no round
        // trip: only RPC servers are timed).
        double   interval_ms;
        double   round_trip_ms;
    };

    // Defaults: no byte, LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS, no chained callback. Returned by
    // value; any thread.
    LLAMA_CANCEL_API struct llama_cancel_hook_params llama_cancel_hook_default_params(void);

    // Creates a hook; `params` NULL means the defaults (`params` is copied; its flag pointer is kept
    // and read during graphs, see llama_cancel_hook_set_flag). The caller owns the hook. NULL if out
    // of memory. Any thread.
    LLAMA_CANCEL_API struct llama_cancel_hook * llama_cancel_hook_init(const struct llama_cancel_hook_params * params);
    // Frees the hook; NULL does nothing. Call it after every context and mtmd context it is bound to
    // was freed (their schedulers keep its address as cb_eval_user_data), on any thread, once no
    // graph runs with it.
    LLAMA_CANCEL_API void llama_cancel_hook_free(struct llama_cancel_hook * hook);

    // Installs the hook as params->cb_eval before llama_init_from_model, chaining any cb_eval
    // already there (the hook keeps that pointer and its user data). One hook per context: the
    // scheduler calls it on the decoding thread. `params` is changed in place, on the caller's
    // thread, before the context exists; a NULL hook or params does nothing.
    LLAMA_CANCEL_API void llama_cancel_hook_bind(struct llama_cancel_hook * hook, struct llama_context_params * params);

    // The ggml_backend_sched_eval_callback itself, with the hook as user data (for mtmd_context_params
    // and other schedulers: set cb_eval to it and cb_eval_user_data to the hook). The scheduler calls
    // it on the thread that computes the graph; a NULL hook never stops and places no checkpoint.
    LLAMA_CANCEL_API bool llama_cancel_hook_eval_callback(struct ggml_tensor * t, bool ask, void * hook);

    // The byte the hook reads. llama_cancel_decode sets it to its own for the call and restores it.
    // Not synchronized: change it only while no graph runs with this hook.
    LLAMA_CANCEL_API void           llama_cancel_hook_set_flag(struct llama_cancel_hook * hook, const int8_t * flag);
    LLAMA_CANCEL_API const int8_t * llama_cancel_hook_get_flag(const struct llama_cancel_hook * hook);

    // The hook's state below is not synchronized: call these on the thread that decodes or encodes
    // with the hook (the scheduler calls the hook there), or while no graph runs with it.

    // True when the hook stopped a graph since the last reset: that graph's results are garbage.
    // False for a NULL hook.
    LLAMA_CANCEL_API bool llama_cancel_hook_stopped(const struct llama_cancel_hook * hook);
    // Clears the stopped state and the work counted toward the next checkpoint before the next graph
    // (llama_cancel_decode does it before each llama_decode call); learnt rates are kept. NULL does
    // nothing.
    LLAMA_CANCEL_API void llama_cancel_hook_reset(struct llama_cancel_hook * hook);
    // Counters for benchmarks and diagnostics, returned by value; zeros for a NULL hook.
    LLAMA_CANCEL_API struct llama_cancel_hook_stats llama_cancel_hook_get_stats(const struct llama_cancel_hook * hook);

    //
    // Cancellable decode
    //

    enum llama_cancel_status {
        LLAMA_CANCEL_OK        =  0, // every token of the batch is in memory, outputs are valid
        LLAMA_CANCEL_CANCELLED =  1, // stopped by the byte: only whole ubatches are in memory
        LLAMA_CANCEL_ERROR     = -1, // invalid argument or a llama_decode failure; see `message`
    };

    struct llama_cancel_decode_params {
        // Caller-owned byte, nonzero = stop. NULL never cancels. Only read during the call.
        const int8_t * flag;

        // The caller's own abort callback, if any: consulted beside the byte during the call and
        // installed on the context again before the call returns (NULL = none installed).
        ggml_abort_callback abort_callback;
        void *              abort_callback_data;

        // The hook bound to this context at creation (llama_cancel_hook_bind), or NULL for the CPU
        // backend alone. A graph the hook stopped on a GPU-API, RPC or BLAS backend is rolled back
        // here (llama_decode itself reports it as success).
        struct llama_cancel_hook * hook;

        // Where outputs may be read after LLAMA_CANCEL_OK. With a hook, or on a model with
        // recurrent state (llama_model_is_recurrent / llama_model_is_hybrid), a stop can only be
        // rolled back to the start of a llama_decode call, so a batch larger than n_ubatch is
        // decoded one n_ubatch slice per call, and llama.cpp then holds only the last slice's outputs.
        // - false (default): a batch that asks for any output is decoded whole (one call), so its
        //   outputs read as after llama_decode, by batch index or negative index; a stop inside it
        //   rolls the whole batch back (n_committed 0) in those two cases.
        // - true: a batch whose outputs all lie in its last slice is sliced too (a stop keeps the
        //   finished slices); read its outputs by negative index (llama_get_logits_ith(ctx, -1)) or
        //   by batch index through llama_cancel_get_logits_ith / llama_cancel_get_embeddings_ith.
        // A batch with outputs before its last slice, and pooled embeddings, are decoded whole,
        // except with per-sequence bytes (seq_flags): there every output token, with the tokens of
        // its sequence after it, is moved to the last slice, so that a sequence's stop undoes one
        // slice; read those outputs through seq_output.
        bool sliced_outputs;

        // Stop-time budget in ms (0: none). On the CPU a stop waits for the graph node in flight,
        // and the longest node grows with the tokens per llama_decode call; with a budget the
        // batch is decoded in slices (llama_decode calls) sized so that the longest node, as
        // measured on the previous slice (the abort callback times each node on the decoding
        // thread), stays within the budget; slices grow back to n_ubatch when the nodes allow.
        // On a GPU or RPC device a stop waits for the eval callback's next checkpoint: the hook's
        // and the stateless callback's interval is capped at 0.7 of the budget for the call, and a
        // slice whose time between two checkpoints still outlasted the budget (a node they cannot
        // split) makes the next slices smaller. The context's n_ubatch is untouched. Applies to batches whose only output is the last token
        // (read it as with sliced_outputs); other batches are decoded as without a budget. What
        // ends in memory is the same as for llama_decode with those slices. result->budget_missed
        // says when a node (or a device's time between checkpoints) outlasted the budget (even one
        // token per call can be too long), and result->longest_node_ms what it measured. Negative:
        // LLAMA_CANCEL_ERROR.
        float max_stop_ms;

        // Per-sequence cancel: seq_flags[s] is the caller-owned byte of sequence s (NULL: none),
        // for s < n_seq_flags; NULL seq_flags: none. When the byte of a sequence that has tokens in
        // the batch is set during the call, the llama_decode call in flight stops (it may hold other
        // sequences' tokens, and it stops even without that sequence's, which may come in a later
        // call: the drop is not delayed) and is rolled back as a cancel is: to its finished ubatches on a KV
        // cache decoded whole, to its start with a hook or recurrent state (see sliced_outputs).
        // That sequence keeps what is committed (n_committed_seq[s]) and its remaining tokens are
        // dropped (for a token in several sequences, only that sequence id); the call goes on with
        // the other sequences. Their outputs among the finished ubatches are decoded again (with
        // what follows them), so that every survivor's last output is in the last llama_decode call.
        // A byte set on entry drops its sequence before anything runs; a byte of a sequence without
        // tokens in the batch changes nothing. Seen on the CPU by the abort callback and on other
        // backends through params->hook (the stateless eval callback knows only one byte), and
        // between llama_decode calls.
        const int8_t * const * seq_flags;
        int32_t                n_seq_flags;
        // Optional outputs, n_seq_flags entries each, indexed by sequence id. seq_cancelled[s]: 0 on
        // entry, 1 once the call dropped sequence s, stored (atomically, release order) at the moment
        // it is dropped: from then on the call no longer touches that sequence's memory, so another
        // thread polling the entry may answer that request before the call returns (read its memory
        // only after the call). seq_output[s]: the index to pass to llama_get_logits_ith /
        // llama_get_embeddings_ith for the sequence's last output in the batch after LLAMA_CANCEL_OK
        // (-1: none, or dropped). Once a sequence is dropped the last call's tokens may not be
        // consecutive batch tokens: read outputs then through seq_output or by negative index
        // (llama_cancel_get_logits_ith returns NULL when result->output_base is -1).
        int8_t *               seq_cancelled;
        int32_t *              seq_output;
    };

    struct llama_cancel_decode_result {
        int32_t status;      // enum llama_cancel_status, the same value the call returns
        int32_t decode_ret;  // what llama_decode returned (0 when it was not called)
        int32_t n_committed; // leading batch tokens now in memory: resume from batch index n_committed
        int32_t output_base; // after LLAMA_CANCEL_OK, batch index of the last llama_decode call's first
                             // token: output i is llama.cpp's index i - output_base (0 unless sliced;
                             // -1 when a dropped sequence left the last call's tokens not consecutive)
        char    message[256]; // readable reason for LLAMA_CANCEL_ERROR, empty otherwise
        int32_t n_decode_calls;  // llama_decode calls made
        float   longest_node_ms; // with a budget: what a stop could wait for, ms: the longest CPU
                                 // graph node, or a device's longest time between checkpoints
        bool    budget_missed;   // with a budget: a node took longer, or the batch could not be sliced
        int32_t n_seq_cancelled; // sequences dropped by their byte (params->seq_flags)
    };

    // Defaults: no byte, no caller abort callback, no hook, outputs readable by batch index
    // (sliced_outputs false), no stop-time budget (max_stop_ms 0), no per-sequence bytes or outputs
    // (seq_* NULL, n_seq_flags 0). Returned by value; any thread.
    LLAMA_CANCEL_API struct llama_cancel_decode_params llama_cancel_decode_default_params(void);

    // Decodes `batch` on `ctx` while honouring the byte at params->flag: through the abort callback
    // on the CPU backend and, with params->hook, through eval-callback checkpoints on every backend.
    // Call it on the thread that owns `ctx` (not thread-safe per context, like llama_decode); any
    // other thread may store into the byte at any time. The batch stays owned by the caller.
    // - A byte already set on entry: returns LLAMA_CANCEL_CANCELLED at once, memory untouched.
    // - A cancel during the call: returns LLAMA_CANCEL_CANCELLED; memory holds the previous content
    //   plus the ubatches computed in full, which are the first result->n_committed batch tokens
    //   (per sequence: n_committed_seq[s], when given). Resume by decoding the batch from index
    //   n_committed: the committed ubatches are not computed again.
    // - Errors (NULL ctx, a batch larger than n_batch, a failed llama_decode): LLAMA_CANCEL_ERROR
    //   with result->message; memory is as llama_decode leaves it for that error.
    // - Memory after a cancel, on every memory kind (KV cache, sliding window, recurrent, hybrid):
    //   byte for byte what a clean decode of the committed tokens leaves. A KV cache keeps each
    //   finished ubatch of a batch decoded whole; with a hook or recurrent state the committed part
    //   ends at a slice boundary (see sliced_outputs). For models with recurrent state the call
    //   copies each touched sequence's recurrent state (llama_state_seq_get_data_ext,
    //   LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY) before each llama_decode call to put it back on a stop;
    //   should that fail, LLAMA_CANCEL_ERROR says which sequence was cleared (empty and usable).
    // - Outputs after LLAMA_CANCEL_OK: see sliced_outputs; llama_cancel_get_logits_ith reads them by
    //   batch index while the last call's tokens are consecutive batch tokens (see seq_output).
    // On return the context's abort callback is params->abort_callback again. `params` NULL means
    // the defaults. `result` and `n_committed_seq` may be NULL; n_committed_seq, when given, holds
    // `n_seq` counters indexed by sequence id, each set to that sequence's committed batch tokens.
    LLAMA_CANCEL_API int32_t llama_cancel_decode(
            struct llama_context                    * ctx,
            struct llama_batch                        batch,
            const struct llama_cancel_decode_params * params,
            struct llama_cancel_decode_result       * result,
            int32_t                                 * n_committed_seq,
            int32_t                                   n_seq);

    // Output i (a batch index, or negative from the last output) of the batch that `result`
    // describes, after llama_cancel_decode returned LLAMA_CANCEL_OK into it: llama_get_logits_ith /
    // llama_get_embeddings_ith shifted by result->output_base. NULL when the decode was not OK, when
    // the batch did not ask for output i, or when ctx is NULL; `result` NULL reads llama.cpp's index
    // i as is. Valid until the next decode on ctx; owned by ctx. Call it on the context's thread.
    LLAMA_CANCEL_API const float * llama_cancel_get_logits_ith(
            struct llama_context                    * ctx,
            const struct llama_cancel_decode_result * result,
            int32_t                                   i);
    LLAMA_CANCEL_API const float * llama_cancel_get_embeddings_ith(
            struct llama_context                    * ctx,
            const struct llama_cancel_decode_result * result,
            int32_t                                   i);

    //
    // Token loop
    //

    enum llama_cancel_stop_reason {
        LLAMA_CANCEL_STOP_LENGTH    = 0, // n_predict tokens generated
        LLAMA_CANCEL_STOP_EOG       = 1, // the model produced an end-of-generation token (not in out)
        LLAMA_CANCEL_STOP_CANCELLED = 2, // the byte was set, or on_token returned false
        LLAMA_CANCEL_STOP_ERROR     = 3, // see result->message
    };

    // Called on the generating thread with each sampled token; return false to stop. Native code
    // only (a Dart isolate callback must not be used here); NULL for none.
    typedef bool (*llama_cancel_token_callback)(llama_token token, void * user_data);

    struct llama_cancel_generate_params {
        const int8_t *              flag;      // caller-owned byte, nonzero = stop; NULL never cancels
        int32_t                     n_predict; // most tokens to generate; 0: the prompt only, < 0: an error
        llama_seq_id                seq_id;    // sequence to continue (its memory is kept)
        struct llama_sampler *      sampler;   // caller-owned sampler chain; NULL = greedy
        struct llama_cancel_hook *  hook;      // hook bound to ctx (llama_cancel_hook_bind), or NULL
        llama_cancel_token_callback on_token;
        void *                      on_token_data;
        float                       max_stop_ms; // stop-time budget of every decode (see llama_cancel_decode_params)
    };

    struct llama_cancel_generate_result {
        int32_t   status;                // LLAMA_CANCEL_OK, _CANCELLED or _ERROR, as returned
        int32_t   stop_reason;           // enum llama_cancel_stop_reason
        int32_t   n_prompt_committed;    // prompt tokens now in memory (all unless stopped in the prefill)
        int32_t   n_generated;           // tokens written to out
        int32_t   n_generated_committed; // of those, decoded into memory (n_generated or one fewer)
        llama_pos n_past;                // next position of seq_id: where a resumed request continues
        char      message[256];          // readable reason for LLAMA_CANCEL_ERROR
    };

    // Defaults: no byte, n_predict 32, sequence 0, greedy, no hook, no callback, no stop-time budget
    // (max_stop_ms 0). Returned by value; any thread.
    LLAMA_CANCEL_API struct llama_cancel_generate_params llama_cancel_generate_default_params(void);

    // Decodes `prompt` (n_prompt may be 0: continue from the logits the last decode left, e.g. after
    // llama_cancel_mtmd_eval_chunks) after what seq_id already holds (in n_batch chunks, each a cancellable
    // decode), then samples and decodes up to n_predict tokens into `out` (caller-owned, at least
    // n_predict entries). The byte is honoured inside every decode (both hooks, as
    // llama_cancel_decode) and between tokens. Returns LLAMA_CANCEL_OK (length or end of
    // generation), LLAMA_CANCEL_CANCELLED or LLAMA_CANCEL_ERROR; `result` (may be NULL) tells what
    // was generated and what is in memory. Memory always holds only whole ubatches: the context is
    // ready for the next request, or to resume from result->n_past. Call it on the context's thread.
    LLAMA_CANCEL_API int32_t llama_cancel_generate(
            struct llama_context                      * ctx,
            const llama_token                         * prompt,
            int32_t                                     n_prompt,
            const struct llama_cancel_generate_params * params,
            llama_token                               * out,
            int32_t                                     n_out_max,
            struct llama_cancel_generate_result       * result);

    // Static, readable name of a stop reason; never NULL. Any thread.
    LLAMA_CANCEL_API const char * llama_cancel_stop_reason_str(int32_t reason);

    //
    // Cancellable model load
    //

    struct llama_cancel_load_result {
        int32_t status;       // LLAMA_CANCEL_OK, LLAMA_CANCEL_CANCELLED or LLAMA_CANCEL_ERROR
        char    message[256]; // readable reason when the model is NULL, empty otherwise
    };

    // Loads a model like llama_model_load_from_file, stopping when the byte at `flag` is nonzero:
    // llama.cpp's progress callback reads it while tensors load (params.progress_callback, if any,
    // is chained behind it). Returns the model (free it with llama_model_free), or NULL with
    // result->status CANCELLED (byte set before or during the load; llama.cpp frees what it had
    // allocated) or ERROR (NULL path, a file that cannot be opened (with the reason), a folder, not
    // a GGUF file, truncated or corrupt model).
    // Blocks the calling thread; any thread may store into the byte. `result` may be NULL.
    LLAMA_CANCEL_API struct llama_model * llama_cancel_model_load(
            const char                      * path,
            struct llama_model_params         params,
            const int8_t                    * flag,
            struct llama_cancel_load_result * result);

    // Returns a static, readable name for a status ("ok", "cancelled", "error"); never NULL. Any
    // thread.
    LLAMA_CANCEL_API const char * llama_cancel_status_str(int32_t status);

    //
    // Multimodal (mtmd): cancellable encode + embedding decode of a chunk list
    //
    // Declared here without mtmd.h; always defined. In a library built without libmtmd
    // (llama_cancel_has_mtmd() false; CMake says "no libmtmd") each returns LLAMA_CANCEL_ERROR (or
    // NULL) with the message "built without libmtmd", so a host gets a clear answer at run time
    // rather than a missing symbol. Upstream's hazard: a graph that
    // mtmd_context_params.cb_eval stops still makes mtmd_encode_chunk return 0 with garbage
    // embeddings, and mtmd_helper_eval_chunks returns llama_decode's 2 leaving half a chunk in memory.

    struct mtmd_context;
    struct mtmd_input_chunks;

    // Creates an mtmd context for `text_model` from the projector file at `mmproj_path`, with
    // `encode_hook` bound as its eval callback (cb_eval = llama_cancel_hook_eval_callback,
    // cb_eval_user_data = encode_hook; NULL binds none), `n_threads` encode threads (<= 0: mtmd's
    // default) and the GPU when `use_gpu`; everything else as mtmd_context_params_default(). The byte
    // at `flag` stops the projector load (mtmd's progress callback; a byte set on entry: nothing is
    // opened). Returns the context (free it with mtmd_free before the hook), or NULL with
    // result->status CANCELLED or ERROR (NULL path or model, missing file, not GGUF, a projector mtmd
    // refuses) and a message.
    // Hosts that fill mtmd_context_params themselves make the same two assignments instead.
    // Blocks the calling thread; any thread may store into the byte. `result` may be NULL.
    LLAMA_CANCEL_API struct mtmd_context * llama_cancel_mtmd_init_from_file(
            const char                      * mmproj_path,
            const struct llama_model        * text_model,
            struct llama_cancel_hook        * encode_hook,
            int32_t                           n_threads,
            bool                              use_gpu,
            const int8_t                    * flag,
            struct llama_cancel_load_result * result);

    struct llama_cancel_mtmd_params {
        const int8_t *             flag;        // caller-owned byte, nonzero = stop; NULL never cancels
        struct llama_cancel_hook * decode_hook; // hook bound to the llama context (llama_cancel_hook_bind), or NULL
        llama_seq_id               seq_id;      // sequence the chunks go to
        int32_t                    n_batch;     // tokens per decode call (<= 0: the context's n_batch)
        bool                       logits_last; // logits for the last token of the last chunk (text or media)
        // Stop-time budget of the text and causal embedding decodes (see llama_cancel_decode_params);
        // media decoded with non-causal attention keeps its n_batch slices, and encodes follow the
        // encode hook's interval.
        float                      max_stop_ms;
        // Per-sequence bytes, as in llama_cancel_decode_params (NULL: none): the byte of seq_id
        // (seq_flags[seq_id], when seq_id < n_seq_flags and it is not NULL) stops this evaluation
        // as `flag` does, inside encodes and decodes and between chunks. A host keeping one byte per
        // sequence passes the same array here and to llama_cancel_decode.
        const int8_t * const *     seq_flags;
        int32_t                    n_seq_flags;
    };

    struct llama_cancel_mtmd_result {
        int32_t   status;        // LLAMA_CANCEL_OK, _CANCELLED or _ERROR, as returned
        size_t    n_chunks_done; // chunks [0, n_chunks_done) are in memory: resume with first_chunk = this
        llama_pos n_past;        // next position of seq_id: resume with n_past = this
        char      message[256];  // readable reason for LLAMA_CANCEL_ERROR, empty otherwise
    };

    // Defaults: no byte, no decode hook, sequence 0, the context's n_batch, logits_last true, no
    // stop-time budget (max_stop_ms 0), no per-sequence bytes. Returned by value; any thread.
    LLAMA_CANCEL_API struct llama_cancel_mtmd_params llama_cancel_mtmd_default_params(void);

    // Evaluates chunks[first_chunk..] (text, image and audio, as mtmd_tokenize made them) into
    // sequence params->seq_id of `lctx` from position `n_past` on, like mtmd_helper_eval_chunks, with
    // the byte honoured inside every encode (through `encode_hook`, the hook bound to `mctx` at its
    // creation, or NULL), inside every decode (llama_cancel_decode with params->decode_hook; text and
    // embeddings in n_batch slices, non-causal attention for the media chunks that need it, restored
    // to causal after) and between chunks. `encode_hook` may be params->decode_hook: both run on the
    // calling thread, one after the other. Call it on the thread that owns `lctx` and `mctx`; any
    // thread may store into the byte. Nothing is kept past the call; `params` NULL = the defaults.
    // - LLAMA_CANCEL_OK: every chunk is in memory; result->n_past is after the last one.
    // - LLAMA_CANCEL_CANCELLED: memory holds exactly chunks [first_chunk, n_chunks_done): the chunk the
    //   byte stopped is removed whole (llama_memory_seq_rm from its first position), and an encode a
    //   stopped graph left garbage is never decoded (mtmd_get_output_embd then holds garbage too).
    //   Call again with first_chunk = n_chunks_done and n_past = result->n_past to resume: on the CPU
    //   the final logits are bit-identical to an uninterrupted call with the same n_batch. A byte set
    //   on entry returns this at once, memory untouched.
    // - LLAMA_CANCEL_ERROR: NULL mctx, lctx or chunks, first_chunk past the end, a bad seq_id or
    //   n_batch, an M-RoPE projector (its positions are not supported yet), a failed encode or decode;
    //   result->message says which. Memory holds chunks [first_chunk, n_chunks_done), as for a cancel.
    // Positions from n_past on must be free in seq_id. `result` may be NULL.
    LLAMA_CANCEL_API int32_t llama_cancel_mtmd_eval_chunks(
            struct mtmd_context                   * mctx,
            struct llama_cancel_hook              * encode_hook,
            struct llama_context                  * lctx,
            const struct mtmd_input_chunks        * chunks,
            size_t                                  first_chunk,
            llama_pos                               n_past,
            const struct llama_cancel_mtmd_params * params,
            struct llama_cancel_mtmd_result       * result);

    // llama_cancel_generate with a multimodal prompt: evaluates chunks[first_chunk..] from n_past
    // (llama_cancel_mtmd_eval_chunks with params->flag, params->hook as decode hook, params->seq_id,
    // logits for the last token), then runs the token loop. Same threads, ownership and returns as
    // llama_cancel_generate; when the prompt is stopped, result->n_past and *n_chunks_done (may be
    // NULL) tell where to resume, as for llama_cancel_mtmd_eval_chunks, and nothing is generated.
    // result->n_prompt_committed counts prompt positions.
    LLAMA_CANCEL_API int32_t llama_cancel_generate_mtmd(
            struct mtmd_context                       * mctx,
            struct llama_cancel_hook                  * encode_hook,
            struct llama_context                      * lctx,
            const struct mtmd_input_chunks            * chunks,
            size_t                                      first_chunk,
            llama_pos                                   n_past,
            const struct llama_cancel_generate_params * params,
            llama_token                               * out,
            int32_t                                     n_out_max,
            struct llama_cancel_generate_result       * result,
            size_t                                    * n_chunks_done);

#ifdef __cplusplus
}
#endif

#endif // LLAMA_CANCEL_H
