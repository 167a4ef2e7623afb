'use strict';
// llama_cancel_embed on koffi's worker thread: pooled rows of many sequences, stopped by a byte the
// main thread stores while a graph of the second group runs; the finished sequences' rows are the
// uninterrupted call's bit for bit, and the resume completes every row (tiny model, mean pooling).
const test = require('node:test');
const assert = require('node:assert/strict');
const koffi = require('koffi');
const { env, library, Probe, cancelFromMain, bounded, tokens, llamaCancel } = require('./host');

const N_SEQS = 8, N_UBATCH = 32;

test('an embedding stopped from the main thread keeps its finished sequences and resumes', async () => {
    const lib = library();
    const byte = new llamaCancel.Byte();
    const probe = new Probe(byte);
    const { model, status, message } = lib.modelLoad(env('LLAMA_CANCEL_TINY_MODEL'));
    assert.equal(status, llamaCancel.OK, message);
    const seqs = Array.from({ length: N_SEQS }, (_, s) => tokens(10 + 2 * s, 200, 7919 + s));
    const context = () => lib.context(model, { n_ctx: 1024, n_batch: 512, n_ubatch: N_UBATCH, n_seq_max: N_SEQS,
                                               n_threads: 2, n_threads_batch: 2, embeddings: true,
                                               pooling_type: 1, op_offload: false, offload_kqv: false });
    let ctx = context();
    const want = await bounded(lib.embedAsync(ctx, seqs), 'an uninterrupted embedding');
    assert.equal(want.status, llamaCancel.OK, want.result.message);
    assert.ok(want.result.n_calls > 1, 'more than one group');
    koffi.free(want.out);
    lib.llama.llama_free(ctx);

    ctx = context();
    const opts = { byte, abortCallback: probe.abortCallback, abortCallbackData: probe.ptr };
    probe.arm(0);
    koffi.free(lib.embed(ctx, seqs.slice(0, 2), opts).out);
    const perGroup = probe.calls(); // abort calls of one group's graph
    lib.llama.llama_memory_clear(lib.llama.llama_get_memory(ctx), true);
    const { value: r } = await cancelFromMain(probe, byte, perGroup + Math.floor(perGroup / 2),
        () => lib.embedAsync(ctx, seqs, opts));
    assert.equal(r.status, llamaCancel.CANCELLED, r.result.message);
    assert.ok(r.nDone > 0 && r.nDone < N_SEQS, `a group finished before the store (${r.nDone})`);
    assert.deepEqual(r.rows.slice(0, r.nDone), want.rows.slice(0, r.nDone));
    assert.ok(r.rows.slice(r.nDone).every((x) => x === null));
    const resumed = await bounded(lib.embedAsync(ctx, seqs, { ...opts, first: r.nDone, out: r.out }), 'the resume');
    assert.equal(resumed.status, llamaCancel.OK, resumed.result.message);
    assert.deepEqual(resumed.rows, want.rows, 'the resumed rows are the uninterrupted call\'s');
    koffi.free(r.out);
    lib.llama.llama_free(ctx);
    lib.llama.llama_model_free(model);
    probe.free();
});
