'use strict';
// Model load, context, and llama_cancel_decode through koffi's asynchronous call on a worker
// thread while the main thread stores the byte: every decode returns CANCELLED with whole ubatches
// in memory, then resumes. The worst store-to-return latency is printed beside the decode time.
const test = require('node:test');
const assert = require('node:assert/strict');
const koffi = require('koffi');
const { env, library, Probe, cancelFromMain, bounded, tokens, llamaCancel } = require('./host');

const N_TOKENS = 256, N_UBATCH = 64, RUNS = 10;
const N_PREFILL = 512, N_PREFILL_UBATCH = 128; // four ubatches

test('decodes on a worker thread stop when the main thread stores the byte', async () => {
    const lib = library();
    const byte = new llamaCancel.Byte();
    const probe = new Probe(byte);
    const { model, status: loadStatus, message } = lib.modelLoad(env('LLAMA_CANCEL_BENCH_MODEL'), byte);
    assert.equal(loadStatus, llamaCancel.OK, message);
    const ctx = lib.context(model, { n_ctx: 512, n_batch: N_TOKENS, n_ubatch: N_UBATCH, n_threads: 2,
                                     n_threads_batch: 2, op_offload: false, offload_kqv: false });
    assert.ok(ctx, 'context created');
    const mem = lib.llama.llama_get_memory(ctx);
    const toks = tokens(N_TOKENS);
    const { batch, tokens: native } = lib.tokensBatch(toks);
    const opts = { byte, abortCallback: probe.abortCallback, abortCallbackData: probe.ptr, nSeq: 1 };

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
        const { value, ms } = await cancelFromMain(probe, byte, holdAt, () => lib.decodeAsync(ctx, batch, opts));
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
    byte.set();
    const pre = lib.decode(ctx, batch, { byte });
    byte.clear();
    assert.equal(pre.status, llamaCancel.CANCELLED);
    assert.equal(lib.llama.llama_memory_seq_pos_max(mem, 0), -1);

    native.free();
    lib.llama.llama_free(ctx);
    lib.llama.llama_model_free(model);
    probe.free();
    byte.free();
});

test('a model load stopped by the byte returns no model and says so', () => {
    const lib = library();
    const byte = new llamaCancel.Byte();
    byte.set();
    const r = lib.modelLoad(env('LLAMA_CANCEL_TINY_MODEL'), byte);
    assert.equal(r.model, null);
    assert.equal(r.status, llamaCancel.CANCELLED);
    const missing = lib.modelLoad('/nonexistent/model.gguf', null);
    assert.equal(missing.model, null);
    assert.equal(missing.status, llamaCancel.ERROR);
    assert.ok(missing.message.length > 0);
    byte.free();
});

test('a byte per sequence: a set one drops its sequence, one of a sequence without tokens changes nothing', () => {
    const lib = library();
    const { model, status: loadStatus, message } = lib.modelLoad(env('LLAMA_CANCEL_TINY_MODEL'));
    assert.equal(loadStatus, llamaCancel.OK, message);
    const ctx = lib.context(model, { n_ctx: 256, n_batch: 64, n_ubatch: 64, n_seq_max: 2, n_threads: 2,
                                     n_threads_batch: 2, op_offload: false, offload_kqv: false });
    const mem = lib.llama.llama_get_memory(ctx);
    const { batch, tokens: native } = lib.tokensBatch(tokens(16)); // sequence 0
    const set = new llamaCancel.Byte();
    set.set();

    let r = lib.decode(ctx, batch, { seqBytes: [null, set] });
    assert.equal(r.status, llamaCancel.OK, r.result.message);
    assert.deepEqual(r.seqs.map((q) => q.cancelled), [0, 0], 'sequence 1 has no token in the batch');
    assert.ok(r.seqs[0].output >= 0);
    assert.ok(lib.llama.llama_get_logits_ith(ctx, r.seqs[0].output), "sequence 0's output is readable");
    assert.deepEqual(r.seqs.map((q) => q.n_committed), [16, 0]);

    lib.llama.llama_memory_clear(mem, true);
    r = lib.decode(ctx, batch, { seqBytes: [set, null] });
    assert.equal(r.status, llamaCancel.CANCELLED, 'its only sequence dropped: a cancel');
    assert.deepEqual(r.seqs.map((q) => q.cancelled), [1, 0]);
    assert.equal(r.result.n_seq_cancelled, 1);
    assert.equal(lib.llama.llama_memory_seq_pos_max(mem, 0), -1);

    native.free();
    set.free();
    lib.llama.llama_free(ctx);
    lib.llama.llama_model_free(model);
});

test('a decode reports where its byte was read: every graph with a hook bound, the CPU nodes without', () => {
    // result.reach: REACH.GRAPH when a llama-cancel eval callback ran in every graph (the hook: every
    // backend), REACH.CPU when the abort callback alone read the byte (a GPU's graph runs to its end).
    const lib = library();
    const byte = new llamaCancel.Byte();
    const { model, status: loadStatus, message } = lib.modelLoad(env('LLAMA_CANCEL_TINY_MODEL'));
    assert.equal(loadStatus, llamaCancel.OK, message);
    const reachOf = (hook) => {
        const ctx = lib.context(model, { n_ctx: 64, n_batch: 32, n_ubatch: 32, n_threads: 2, n_threads_batch: 2 },
            hook);
        assert.ok(ctx, 'context created');
        const { batch, tokens: native } = lib.tokensBatch(tokens(32));
        try {
            const r = lib.decode(ctx, batch, { byte, hook });
            assert.equal(r.status, llamaCancel.OK, r.result.message);
            assert.equal(r.result.n_committed, 32);
            return r.result.reach;
        } finally {
            native.free();
            lib.llama.llama_free(ctx);
        }
    };
    const hook = lib.hook(byte);
    try {
        assert.equal(reachOf(hook), llamaCancel.REACH.GRAPH, 'a hook bound');
    } finally {
        lib.c.llama_cancel_hook_free(hook);
    }
    assert.equal(reachOf(null), llamaCancel.REACH.CPU, 'no eval callback');
    lib.llama.llama_model_free(model);
    byte.free();
});

// An eval callback chained behind the hook that counts the scheduler's asks and, at ask `stopAt`,
// asks for the node (a checkpoint there) and stores 1 into the byte once it is computed: the store
// comes from inside the computation, at a node chosen by count. A JavaScript callback (koffi.register),
// so the decode runs on this thread, synchronously.
const EvalCallback = koffi.proto('bool llama_cancel_test_eval_cb(void *t, bool ask, void *data)');
class AskCounter {
    constructor(byte) {
        this.byte = byte;
        this.arm();
        this.address = koffi.register((t, ask) => {
            if (ask) return ++this.asks === this.stopAt;
            if (this.stopAt !== null && this.asks >= this.stopAt && this.storedAt === null) {
                this.byte.set();
                this.storedAt = this.asks;
            }
            return true;
        }, koffi.pointer(EvalCallback));
    }
    arm(stopAt = null) { this.asks = 0; this.stopAt = stopAt; this.storedAt = null; }
    free() { koffi.unregister(this.address); }
}

// The raw bytes of batch index i's logits (llama_cancel_get_logits_ith), for a bitwise compare.
function logitsBytes(lib, ctx, result, i) {
    const native = koffi.alloc(llamaCancel.types.llama_cancel_decode_result, 1);
    try {
        koffi.encode(native, llamaCancel.types.llama_cancel_decode_result, result);
        const ptr = lib.c.llama_cancel_get_logits_ith(ctx, native, i);
        assert.ok(ptr, `batch index ${i} has logits`);
        const n = lib.llama.llama_vocab_n_tokens(lib.llama.llama_model_get_vocab(lib.llama.llama_get_model(ctx)));
        return Buffer.from(new Uint8Array(koffi.view(ptr, 4 * n))); // a copy (Buffer.from(view) would share it)
    } finally {
        koffi.free(native);
    }
}

test('a prefill stopped inside its third ubatch keeps two and resumes to bit-identical logits', () => {
    // 512 tokens in ubatches of 128, the byte stored from inside the third: CANCELLED with the two
    // finished ubatches committed (a stop that threw finished work away, or one before any work,
    // fails here), and the rest decoded from there gives the last token's logits of a clean decode
    // on a fresh context, byte for byte.
    const lib = library();
    const byte = new llamaCancel.Byte();
    const counter = new AskCounter(byte);
    const { model, status: loadStatus, message } = lib.modelLoad(env('LLAMA_CANCEL_TINY_MODEL'));
    assert.equal(loadStatus, llamaCancel.OK, message);
    const fields = { n_ctx: N_PREFILL, n_batch: N_PREFILL, n_ubatch: N_PREFILL_UBATCH, n_threads: 2, n_threads_batch: 2,
                     op_offload: false, offload_kqv: false };
    const hook = lib.hook(byte, { chain: counter.address });
    const ctx = lib.context(model, fields, hook);
    assert.ok(ctx, 'context created');
    const mem = lib.llama.llama_get_memory(ctx);
    const toks = tokens(N_PREFILL);
    const decode = (c, values, h) => {
        const { batch, tokens: native } = lib.tokensBatch(values);
        try {
            return lib.decode(c, batch, { byte, hook: h, nSeq: 1 });
        } finally {
            native.free();
        }
    };
    const nUbatches = N_PREFILL / N_PREFILL_UBATCH;

    // A clean run through the hooked context: how many asks a ubatch takes.
    lib.llama.llama_memory_clear(mem, true);
    counter.arm();
    let r = decode(ctx, toks, hook);
    assert.equal(r.status, llamaCancel.OK, r.result.message);
    assert.equal(r.result.n_committed, N_PREFILL);
    assert.equal(counter.asks % nUbatches, 0, `${counter.asks} asks in ${nUbatches} equal graphs`);
    const perUbatch = counter.asks / nUbatches;
    assert.ok(perUbatch > 4);

    // The byte clear on entry, stored at the middle of the third ubatch's graph.
    lib.llama.llama_memory_clear(mem, true);
    byte.clear();
    const stopAt = 2 * perUbatch + Math.floor(perUbatch / 2);
    counter.arm(stopAt);
    r = decode(ctx, toks, hook);
    assert.equal(counter.storedAt, stopAt, 'stored inside the third ubatch');
    assert.equal(r.status, llamaCancel.CANCELLED, r.result.message);
    assert.equal(r.result.status, llamaCancel.CANCELLED);
    const n = r.result.n_committed;
    assert.ok(n > 0, 'the finished ubatches are kept');
    assert.equal(n % N_PREFILL_UBATCH, 0, 'only whole ubatches are committed');
    assert.ok(n < N_PREFILL);
    assert.equal(n, 2 * N_PREFILL_UBATCH, 'exactly the two ubatches finished before the store');
    assert.deepEqual(r.seqs, [{ n_committed: n, output: -1, cancelled: 0 }]);
    assert.equal(lib.llama.llama_memory_seq_pos_max(mem, 0), n - 1);
    assert.ok(counter.asks < 3 * perUbatch, 'the third graph was abandoned');

    // Resume from n_committed with the byte cleared.
    byte.clear();
    counter.arm();
    r = decode(ctx, toks.slice(n), hook);
    assert.equal(r.status, llamaCancel.OK, r.result.message);
    assert.equal(r.result.n_committed, N_PREFILL - n);
    assert.equal(lib.llama.llama_memory_seq_pos_max(mem, 0), N_PREFILL - 1);
    const resumed = logitsBytes(lib, ctx, r.result, N_PREFILL - n - 1);

    // A clean, uninterrupted decode on a fresh context without a hook.
    const fresh = lib.context(model, fields);
    assert.ok(fresh, 'fresh context created');
    r = decode(fresh, toks, null);
    assert.equal(r.status, llamaCancel.OK, r.result.message);
    const want = logitsBytes(lib, fresh, r.result, N_PREFILL - 1);
    lib.llama.llama_free(fresh);
    assert.equal(resumed.length, want.length);
    assert.ok(want.some((b) => b !== 0), 'real logits');
    assert.ok(resumed.equals(want), "the resumed decode's last logits are bit-identical to a clean decode's");

    lib.llama.llama_free(ctx);
    lib.c.llama_cancel_hook_free(hook);
    lib.llama.llama_model_free(model);
    counter.free();
    byte.free();
});
