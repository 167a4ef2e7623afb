'use strict';
// Model load, context, and llama_cancel_decode through koffi's asynchronous call on a worker
// thread while the main thread stores the byte: every decode returns CANCELLED with whole ubatches
// in memory, then resumes. The worst store-to-return latency is printed beside the decode time.
const test = require('node:test');
const assert = require('node:assert/strict');
const { env, library, Probe, cancelFromMain, bounded, tokens, llamaCancel } = require('./host');

const N_TOKENS = 256, N_UBATCH = 64, RUNS = 10;

test('decodes on a worker thread stop when the main thread stores the byte', async () => {
    const lib = library();
    const flag = new llamaCancel.Flag();
    const probe = new Probe(flag);
    const { model, status: loadStatus, message } = lib.modelLoad(env('LLAMA_CANCEL_BENCH_MODEL'), flag);
    assert.equal(loadStatus, llamaCancel.OK, message);
    const ctx = lib.context(model, { n_ctx: 512, n_batch: N_TOKENS, n_ubatch: N_UBATCH, n_threads: 2,
                                     n_threads_batch: 2, op_offload: false, offload_kqv: false });
    assert.ok(ctx, 'context created');
    const mem = lib.llama.llama_get_memory(ctx);
    const toks = tokens(N_TOKENS);
    const { batch, tokens: native } = lib.tokensBatch(toks);
    const opts = { flag, abortCallback: probe.abortCallback, abortCallbackData: probe.ptr, nSeq: 1 };

    probe.arm(0);
    const times = [];
    let want = null;
    for (let i = 0; i < 3; ++i) {
        lib.llama.llama_memory_clear(mem, true);
        const t0 = process.hrtime.bigint();
        const r = await bounded(lib.decodeAsync(ctx, batch, opts), 'a clean decode');
        times.push(Number(process.hrtime.bigint() - t0) / 1e6);
        assert.equal(r.status, llamaCancel.OK, r.result.message);
        want = lib.logitsIth(ctx, r.result, N_TOKENS - 1);
    }
    assert.ok(want && want.length > 0, 'the clean decode has its last output');
    const decodeMs = times.sort((a, b) => a - b)[1];
    const nCalls = Math.floor(probe.calls() / 3);
    assert.ok(nCalls > 0);

    const latencies = [];
    let last = null;
    for (let i = 0; i < RUNS; ++i) {
        lib.llama.llama_memory_clear(mem, true);
        const holdAt = Math.floor(nCalls * (0.3 + (0.36 * i) / (RUNS - 1)));
        const { value, ms } = await cancelFromMain(probe, flag, holdAt, () => lib.decodeAsync(ctx, batch, opts));
        latencies.push(ms);
        last = value;
        assert.equal(value.status, llamaCancel.CANCELLED, value.result.message);
        assert.equal(value.result.n_committed % N_UBATCH, 0, 'only whole ubatches are committed');
        assert.ok(value.result.n_committed < N_TOKENS);
        assert.deepEqual(value.seqs, [{ n_committed: value.result.n_committed, output: -1, cancelled: 0 }]);
        assert.equal(lib.llama.llama_memory_seq_pos_max(mem, 0), value.result.n_committed - 1);
    }

    // Resume the last one from its committed position: the last token's logits, read by batch index,
    // are those of an uninterrupted decode.
    const rest = lib.tokensBatch(toks.slice(last.result.n_committed));
    const resumed = await bounded(lib.decodeAsync(ctx, rest.batch, opts), 'the resumed decode');
    assert.equal(resumed.status, llamaCancel.OK, resumed.result.message);
    assert.equal(lib.llama.llama_memory_seq_pos_max(mem, 0), N_TOKENS - 1);
    assert.deepEqual(lib.logitsIth(ctx, resumed.result, rest.tokens.length - 1), want, 'resumed logits are bit-identical');
    rest.tokens.free();

    const sorted = [...latencies].sort((a, b) => a - b);
    const worst = sorted[sorted.length - 1];
    console.log(`node decode: ${RUNS}/${RUNS} cancelled from the main thread; store-to-return latency ` +
        `p50 ${sorted[Math.floor(RUNS / 2)].toFixed(2)} ms, worst ${worst.toFixed(2)} ms = ` +
        `${((100 * worst) / decodeMs).toFixed(1)}% of the decode (${decodeMs.toFixed(1)} ms, ${N_TOKENS} tokens)`);

    // A byte set before the call: CANCELLED at once, memory untouched.
    lib.llama.llama_memory_clear(mem, true);
    flag.set();
    const pre = lib.decode(ctx, batch, { flag });
    flag.clear();
    assert.equal(pre.status, llamaCancel.CANCELLED);
    assert.equal(lib.llama.llama_memory_seq_pos_max(mem, 0), -1);

    native.free();
    lib.llama.llama_free(ctx);
    lib.llama.llama_model_free(model);
    probe.free();
    flag.free();
});

test('a model load stopped by the byte returns no model and says so', () => {
    const lib = library();
    const flag = new llamaCancel.Flag();
    flag.set();
    const r = lib.modelLoad(env('LLAMA_CANCEL_TINY_MODEL'), flag);
    assert.equal(r.model, null);
    assert.equal(r.status, llamaCancel.CANCELLED);
    const missing = lib.modelLoad('/nonexistent/model.gguf', null);
    assert.equal(missing.model, null);
    assert.equal(missing.status, llamaCancel.ERROR);
    assert.ok(missing.message.length > 0);
    flag.free();
});

test('a byte per sequence: a set one drops its sequence, one of a sequence without tokens changes nothing', () => {
    const lib = library();
    const { model, status: loadStatus, message } = lib.modelLoad(env('LLAMA_CANCEL_TINY_MODEL'));
    assert.equal(loadStatus, llamaCancel.OK, message);
    const ctx = lib.context(model, { n_ctx: 256, n_batch: 64, n_ubatch: 64, n_seq_max: 2, n_threads: 2,
                                     n_threads_batch: 2, op_offload: false, offload_kqv: false });
    const mem = lib.llama.llama_get_memory(ctx);
    const { batch, tokens: native } = lib.tokensBatch(tokens(16)); // sequence 0
    const set = new llamaCancel.Flag();
    set.set();

    let r = lib.decode(ctx, batch, { seqFlags: [null, set] });
    assert.equal(r.status, llamaCancel.OK, r.result.message);
    assert.deepEqual(r.seqs.map((q) => q.cancelled), [0, 0], 'sequence 1 has no token in the batch');
    assert.ok(r.seqs[0].output >= 0);
    assert.ok(lib.llama.llama_get_logits_ith(ctx, r.seqs[0].output), "sequence 0's output is readable");
    assert.deepEqual(r.seqs.map((q) => q.n_committed), [16, 0]);

    lib.llama.llama_memory_clear(mem, true);
    r = lib.decode(ctx, batch, { seqFlags: [set, null] });
    assert.equal(r.status, llamaCancel.CANCELLED, 'its only sequence dropped: a cancel');
    assert.deepEqual(r.seqs.map((q) => q.cancelled), [1, 0]);
    assert.equal(r.result.n_seq_cancelled, 1);
    assert.equal(lib.llama.llama_memory_seq_pos_max(mem, 0), -1);

    native.free();
    set.free();
    lib.llama.llama_free(ctx);
    lib.llama.llama_model_free(model);
});
