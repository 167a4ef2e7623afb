'use strict';
// The token loop through koffi's asynchronous call, stopped from the main thread between tokens
// and inside the prompt's prefill, then resumed to the tokens an uninterrupted run gives.
const test = require('node:test');
const assert = require('node:assert/strict');
const { env, library, Probe, cancelFromMain, bounded, tokens, llamaCancel } = require('./host');

const N_PROMPT = 48, N_PREDICT = 8;

test('the token loop stops between tokens and inside the prefill, and resumes', async () => {
    const lib = library();
    const byte = new llamaCancel.Byte();
    const graphProbe = new Probe(byte); // chained behind the hook: holds a prefill graph
    const tokenProbe = new Probe(byte); // as on_token: holds the loop between tokens
    const { model, message } = lib.modelLoad(env('LLAMA_CANCEL_TINY_MODEL'));
    assert.ok(model, message);
    const hook = lib.hook(byte, { chain: graphProbe.evalCallback, chainData: graphProbe.ptr });
    const ctx = lib.context(model, { n_ctx: 256, n_batch: 16, n_ubatch: 16, n_threads: 2, n_threads_batch: 2 }, hook);
    const mem = lib.llama.llama_get_memory(ctx);
    const prompt = tokens(N_PROMPT);
    const fresh = () => lib.llama.llama_memory_clear(mem, true);

    fresh();
    graphProbe.arm(0);
    const ref = await bounded(lib.generateAsync(ctx, prompt, N_PREDICT, { byte, hook }), 'the reference run');
    assert.equal(ref.status, llamaCancel.OK, ref.result.message);
    assert.equal(ref.tokens.length, N_PREDICT);

    // Between tokens: the third sampled token waits for the store.
    fresh();
    const between = await cancelFromMain(tokenProbe, byte, 3, () => lib.generateAsync(ctx, prompt, N_PREDICT,
        { byte, hook, onToken: tokenProbe.onToken, onTokenData: tokenProbe.ptr }));
    const b = between.value;
    assert.equal(b.status, llamaCancel.CANCELLED, b.result.message);
    assert.equal(b.result.stop_reason, llamaCancel.STOP.CANCELLED);
    assert.deepEqual(b.tokens, ref.tokens.slice(0, 3));
    assert.equal(b.result.n_past, N_PROMPT + b.result.n_generated_committed);
    assert.equal(lib.llama.llama_memory_seq_pos_max(mem, 0), b.result.n_past - 1);
    console.log(`node token loop: stopped after token 3 from the main thread, ${between.ms.toFixed(2)} ms after the store`);

    // Inside the prefill: a graph node of the prompt waits for the store; then resume.
    fresh();
    graphProbe.arm(0);
    lib.generate(ctx, prompt, 0, { byte, hook });
    const nAsks = graphProbe.calls();
    fresh();
    const prefill = await cancelFromMain(graphProbe, byte, Math.floor((nAsks * 6) / 10),
        () => lib.generateAsync(ctx, prompt, N_PREDICT, { byte, hook }));
    const p = prefill.value;
    assert.equal(p.status, llamaCancel.CANCELLED, p.result.message);
    assert.deepEqual(p.tokens, []);
    assert.ok(p.result.n_prompt_committed < N_PROMPT);
    assert.equal(lib.llama.llama_memory_seq_pos_max(mem, 0), p.result.n_prompt_committed - 1);
    graphProbe.arm(0);
    const resumed = await bounded(lib.generateAsync(ctx, prompt.slice(p.result.n_prompt_committed), N_PREDICT,
        { byte, hook }), 'the resumed run');
    assert.equal(resumed.status, llamaCancel.OK, resumed.result.message);
    assert.deepEqual(resumed.tokens, ref.tokens, 'the resumed run generates what an uninterrupted one does');

    lib.llama.llama_free(ctx);
    lib.c.llama_cancel_hook_free(hook);
    lib.llama.llama_model_free(model);
    graphProbe.free();
    tokenProbe.free();
    byte.free();
});
