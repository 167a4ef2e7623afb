'use strict';
// Text-to-speech through the binding, on the tiny pair in LLAMA_CANCEL_TTS_MODEL /
// LLAMA_CANCEL_TTS_MMPROJ (scripts/make_tts.py; CTest gives the Qwen3-TTS one), on the CPU:
// generateAsync on koffi's worker thread stopped from the main thread inside a clip graph (the
// probe chained behind the projector's hook holds a node until the store) and from a JS onFrame
// callback (koffi runs it on the main thread while the worker waits), each resumed to the
// uninterrupted run's PCM bit for bit; partial PCM and flush; bad input answered with clear errors.
const test = require('node:test');
const assert = require('node:assert/strict');
const { env, library, Probe, cancelFromMain, bounded, llamaCancel } = require('../host');

const { OK, CANCELLED, ERROR, TTS_STEP } = llamaCancel;
const TEXT = 'Hello world, this is a test.';
const WINDOW = 3; // frames per GEN_WAV: several windows in a short generation
const FRAMES = 7; // frames in all: windows of 3, 3 and the final 1

// Bit for bit: the same bytes.
function same(a, b) {
    return a.length === b.length && Buffer.compare(Buffer.from(a.buffer, a.byteOffset, a.byteLength),
        Buffer.from(b.buffer, b.byteOffset, b.byteLength)) === 0;
}

test('text-to-speech on the worker stops from the main thread and resumes bit for bit', async () => {
    const lib = library();
    assert.ok(lib.hasMtmd, 'the library is built with libmtmd');
    const flag = new llamaCancel.Flag();
    const probe = new Probe(flag); // chained behind the projector's hook: holds a GEN_CODE or GEN_WAV node
    const { model, message } = lib.modelLoad(env('LLAMA_CANCEL_TTS_MODEL'));
    assert.ok(model, message);
    const decodeHook = lib.hook(flag);
    const genHook = lib.hook(flag, { chain: probe.evalCallback, chainData: probe.ptr });
    // The backbone's context: embeddings on (its hidden states feed GEN_CODE).
    const lctx = lib.context(model, {
        n_ctx: 1024, n_batch: 16, n_ubatch: 16, n_threads: 2, n_threads_batch: 2, embeddings: true,
        op_offload: false, no_perf: true,
    }, decodeHook);
    assert.ok(lctx, 'the backbone context');
    const mem = lib.llama.llama_get_memory(lctx);
    const { mctx, message: mmsg } = lib.mtmdInit(env('LLAMA_CANCEL_TTS_MMPROJ'), model, { encodeHook: genHook, nThreads: 2 });
    assert.ok(mctx, mmsg);
    assert.equal(lib.mtmd.mtmd_gen_audio_get_info(mctx).type, llamaCancel.MTMD_GEN_AUDIO_TYPE.QWEN3TTS);

    const fresh = () => {
        lib.llama.llama_memory_clear(mem, true);
        flag.clear();
        const made = lib.tts(lctx, mctx, TEXT, { seed: 42, window: WINDOW, maxFrames: FRAMES });
        assert.ok(made.tts, made.message);
        assert.equal(made.status, OK);
        return made.tts;
    };
    const run = { flag, decodeHook, genHook };
    const resumeAndCheck = async (t, want) => {
        flag.clear();
        probe.arm(0);
        const r = await bounded(t.generateAsync(run), 'the resumed run');
        assert.equal(r.status, OK, r.result.message);
        assert.deepEqual([r.result.finished, r.result.n_frames, r.result.n_frames_pending], [1, FRAMES, 0]);
        assert.ok(same(t.pcm(), want), "the resumed generation's PCM is the uninterrupted run's, bit for bit");
    };

    // The uninterrupted run, on the worker.
    probe.arm(0);
    let t = fresh();
    const ref = await bounded(t.generateAsync(run), 'the reference run');
    assert.equal(ref.status, OK, ref.result.message);
    assert.equal(ref.result.stop_reason, llamaCancel.STOP.LENGTH);
    assert.deepEqual([ref.result.finished, ref.result.n_frames, ref.result.n_frames_pending], [1, FRAMES, 0]);
    assert.equal(ref.result.sample_rate, 24000);
    assert.equal(ref.result.n_samples, FRAMES * 1920);
    const want = t.pcm();
    assert.ok(want instanceof Float32Array);
    assert.equal(want.length, ref.result.n_samples);
    assert.ok(want.some((x) => x !== 0), 'the PCM is not silence');
    assert.equal(t.state().n_samples, FRAMES * 1920);
    const genAsks = probe.calls();
    assert.ok(genAsks > 0, 'no GEN_CODE or GEN_WAV node reached the hook bound to mctx');
    t.free();

    // Inside a clip graph: the probe holds a node halfway through the generation's projector asks
    // until this thread stores the byte.
    t = fresh();
    const inGraph = await cancelFromMain(probe, flag, Math.floor(genAsks / 2), () => t.generateAsync(run));
    const g = inGraph.value;
    assert.equal(g.status, CANCELLED, g.result.message);
    assert.equal(g.result.stop_reason, llamaCancel.STOP.CANCELLED);
    assert.ok([TTS_STEP.GEN_CODE, TTS_STEP.GEN_WAV].includes(g.result.step), `step ${g.result.step}`);
    assert.ok(g.result.n_frames < FRAMES && g.result.finished === 0);
    assert.ok(same(t.pcm(), want.subarray(0, g.result.n_samples)), "the finished windows' PCM");
    console.log(`node tts: stopped from the main thread in step ${g.result.step} after ${g.result.n_frames} frames, ` +
        `${inGraph.ms.toFixed(2)} ms after the store`);
    await resumeAndCheck(t, want);
    t.free();

    // From a JS onFrame callback: run on this (the main) thread while the worker waits for it,
    // it stores the byte at frame 2; the generation stops between steps with 2 frames.
    t = fresh();
    probe.arm(0);
    const seen = [];
    let refused = null;
    const between = await bounded(t.generateAsync({
        ...run,
        onFrame: (n, samples) => {
            seen.push([n, samples]);
            if (n === 2) {
                try {
                    t.pcm();
                } catch (e) {
                    refused = e.message; // a call is running: not read while it writes
                }
                flag.set();
            }
            return true;
        },
    }), 'the onFrame run');
    assert.equal(between.status, CANCELLED, between.result.message);
    assert.deepEqual([between.result.step, between.result.n_frames], [TTS_STEP.BETWEEN, 2]);
    assert.deepEqual(seen.map(([n]) => n), [1, 2]);
    assert.match(refused || '', /already running/);
    await resumeAndCheck(t, want);
    t.free();

    // Partial PCM is the finished windows; flush puts the pending frame in and ends the generation.
    t = fresh();
    const part = t.generate({ ...run, nFrames: WINDOW + 1 });
    assert.equal(part.status, OK, part.result.message);
    assert.deepEqual([part.result.n_frames, part.result.n_frames_pending, part.result.n_samples], [WINDOW + 1, 1, WINDOW * 1920]);
    assert.ok(same(t.pcm(), want.subarray(0, WINDOW * 1920)));
    const flushed = await bounded(t.flushAsync(run), 'the flush');
    assert.equal(flushed.status, OK, flushed.result.message);
    assert.deepEqual([flushed.result.n_samples, flushed.result.finished], [(WINDOW + 1) * 1920, 1]);
    t.free();
    assert.throws(() => t.generate(run), /was freed/);

    // Bad input: clear errors.
    lib.llama.llama_memory_clear(mem, true);
    let bad = lib.tts(lctx, mctx, null);
    assert.equal(bad.tts, null);
    assert.equal(bad.status, ERROR);
    assert.match(bad.message, /text/);
    bad = lib.tts(lctx, mctx, TEXT, { lang: 'klingon' });
    assert.equal(bad.tts, null);
    assert.notEqual(bad.message, '');
    const nul = lib.genAudioProcess(mctx, null, null, { flag });
    assert.equal(nul.status, ERROR);
    assert.match(nul.result.message, /NULL/);

    lib.mtmd.mtmd_free(mctx);
    lib.llama.llama_free(lctx);
    lib.c.llama_cancel_hook_free(genHook);
    lib.c.llama_cancel_hook_free(decodeHook);
    lib.llama.llama_model_free(model);
    probe.free();
    flag.free();
});
