'use strict';
// Text-to-speech through the binding, on both pipelines libmtmd generates audio with, each a tiny
// pair of scripts/make_tts.py: Qwen3-TTS (LLAMA_CANCEL_TTS_MODEL / LLAMA_CANCEL_TTS_MMPROJ) and
// Pocket-TTS (LLAMA_CANCEL_TTS_POCKET_MODEL / LLAMA_CANCEL_TTS_POCKET_MMPROJ), on the CPU. The same
// tests run on each (a describe per pipeline, from the loop at the end): generateAsync on koffi's
// worker thread stopped from the main thread inside a clip graph (the probe chained behind the
// projector's hook holds a node until the store) and from a JS onFrame callback (koffi runs it on
// the main thread while the worker waits), each resumed to the uninterrupted run's PCM bit for bit;
// partial PCM and flush; bad input answered with clear errors. Pocket-TTS alone: a voice reference
// and a two-chunk text, stopped from the main thread inside a graph of the second chunk (after the
// backbone's rewind to the voice prefix) and resumed bit for bit.
// One compute thread per context: ggml's spinning workers on a loaded two-core machine slowed a
// generation past its bound once.
const { describe, test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { env, library, Probe, cancelFromMain, llamaCancel } = require('../host');

const { OK, CANCELLED, ERROR, REACH, TTS_STEP, MTMD_GEN_AUDIO_TYPE } = llamaCancel;
const TEXT = 'Hello world, this is a test.';
// Pocket-TTS on the tiny pair: 8 tokens, then 47 (over 50 together): two text chunks (tests/test_tts.cpp's).
const LONG_TEXT = 'Hello world. Hello world and more words here and there and everywhere again and again ' +
    'until the end.';
const WINDOW = 3; // frames per GEN_WAV: several windows in a short generation
const FRAMES = 7; // frames in all: windows of 3, 3 and the final 1
const GEN_WAIT_MS = 120000; // a whole generation on the worker (seconds alone), bounded

const PIPELINES = [
    {
        name: 'qwen3tts', model: 'LLAMA_CANCEL_TTS_MODEL', mmproj: 'LLAMA_CANCEL_TTS_MMPROJ',
        kind: MTMD_GEN_AUDIO_TYPE.QWEN3TTS,
    },
    {
        name: 'pockettts', model: 'LLAMA_CANCEL_TTS_POCKET_MODEL', mmproj: 'LLAMA_CANCEL_TTS_POCKET_MMPROJ',
        kind: MTMD_GEN_AUDIO_TYPE.POCKETTTS,
    },
];

// An asynchronous generation awaited at most GEN_WAIT_MS.
function bounded(promise, what) {
    let timer;
    const timeout = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: no answer within ${GEN_WAIT_MS} ms`)), GEN_WAIT_MS);
    });
    return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// Bit for bit: the same bytes.
function same(a, b) {
    return a.length === b.length && Buffer.compare(Buffer.from(a.buffer, a.byteOffset, a.byteLength),
        Buffer.from(b.buffer, b.byteOffset, b.byteLength)) === 0;
}

// One second of noise as a voice reference (16 kHz mono), as tests/mtmd_media.h makes it.
function noise(seed) {
    let x = (Math.imul(seed, 2654435761) + 1) >>> 0;
    return Float32Array.from({ length: 16000 }, () => {
        x = (x ^ (x << 13)) >>> 0;
        x = (x ^ (x >>> 17)) >>> 0;
        x = (x ^ (x << 5)) >>> 0;
        return 0.2 * ((x % 2001) / 1000 - 1);
    });
}

function pipelineTests(pipeline) {
    const s = {}; // what the tests share: library, byte, probe, hooks, contexts, the reference

    // A generation on an emptied sequence 0.
    function fresh(text = TEXT, opts = {}) {
        s.lib.llama.llama_memory_clear(s.mem, true);
        s.byte.clear();
        const made = s.lib.tts(s.lctx, s.mctx, text, { seed: 42, window: WINDOW, maxFrames: FRAMES, ...opts });
        assert.ok(made.tts, made.message);
        assert.equal(made.status, OK);
        return made.tts;
    }

    // generateAsync to the end, with the probe's count of projector asks at each frame: asks[n] the
    // asks once frame n was committed (asks[0]: 0).
    async function runCounting(t, what) {
        const asks = [0];
        const r = await bounded(t.generateAsync({
            ...s.run,
            onFrame: (n) => {
                asks.push(s.probe.calls());
                return asks.length === n + 1;
            },
        }), what);
        return { ...r, asks };
    }

    async function resumeAndCheck(t, want = s.want, wantResult = s.ref.result) {
        s.byte.clear();
        s.probe.arm(0);
        const r = await bounded(t.generateAsync(s.run), 'the resumed run');
        assert.equal(r.status, OK, r.result.message);
        assert.deepEqual([r.result.finished, r.result.n_frames, r.result.n_frames_pending, r.result.n_chunks_done],
            [1, wantResult.n_frames, 0, wantResult.n_chunks_done]);
        assert.ok(same(t.pcm(), want), "the resumed generation's PCM is the uninterrupted run's, bit for bit");
    }

    before(async () => {
        const lib = s.lib = library();
        assert.ok(lib.hasMtmd, 'the library is built with libmtmd');
        s.byte = new llamaCancel.Byte();
        s.probe = new Probe(s.byte); // chained behind the projector's hook: holds a GEN_CODE or GEN_WAV node
        const { model, message } = lib.modelLoad(env(pipeline.model));
        assert.ok(model, message);
        s.model = model;
        s.hook = lib.hook(s.byte);
        s.mtmdHook = lib.hook(s.byte, { chain: s.probe.evalCallback, chainData: s.probe.ptr });
        // The backbone's context: embeddings on (its hidden states feed GEN_CODE).
        s.lctx = lib.context(model, {
            n_ctx: 1024, n_batch: 16, n_ubatch: 16, n_threads: 1, n_threads_batch: 1, embeddings: true,
            op_offload: false, no_perf: true,
        }, s.hook);
        assert.ok(s.lctx, 'the backbone context');
        s.mem = lib.llama.llama_get_memory(s.lctx);
        const m = lib.mtmdInit(env(pipeline.mmproj), model, { mtmdHook: s.mtmdHook, nThreads: 1 });
        assert.ok(m.mctx, m.message);
        s.mctx = m.mctx;
        s.run = { byte: s.byte, hook: s.hook, mtmdHook: s.mtmdHook };

        // The uninterrupted run, on the worker.
        s.probe.arm(0);
        const t = fresh();
        s.ref = await runCounting(t, 'the reference run');
        s.want = t.pcm();
        s.state = t.state();
        s.genAsks = s.probe.calls(); // the projector graphs' asks in a whole generation
        t.free();
    });

    after(() => {
        if (!s.lib) return;
        if (s.mctx) s.lib.mtmd.mtmd_free(s.mctx);
        if (s.lctx) s.lib.llama.llama_free(s.lctx);
        if (s.mtmdHook) s.lib.c.llama_cancel_hook_free(s.mtmdHook);
        if (s.hook) s.lib.c.llama_cancel_hook_free(s.hook);
        if (s.model) s.lib.llama.llama_model_free(s.model);
        if (s.probe) s.probe.free();
        if (s.byte) s.byte.free();
    });

    test('a generation on the worker runs to its end', () => {
        const r = s.ref.result;
        assert.equal(s.lib.mtmd.mtmd_gen_audio_get_info(s.mctx).type, pipeline.kind);
        assert.equal(s.ref.status, OK, r.message);
        assert.deepEqual([r.stop_reason, r.step], [llamaCancel.STOP.LENGTH, TTS_STEP.NONE]);
        assert.deepEqual([r.finished, r.n_frames, r.n_frames_pending, r.n_chunks_done], [1, FRAMES, 0, 1]);
        assert.equal(r.sample_rate, 24000);
        assert.equal(r.n_samples, FRAMES * 1920);
        assert.ok(s.want instanceof Float32Array);
        assert.equal(s.want.length, r.n_samples);
        assert.ok(s.want.some((x) => x !== 0), 'the PCM is not silence');
        assert.equal(s.state.n_samples, FRAMES * 1920);
        assert.ok(s.genAsks > 0, 'no GEN_CODE or GEN_WAV node reached the hook bound to mctx');
    });

    test('stopped from the main thread inside a clip graph, resumed bit for bit', async () => {
        // The probe holds a node halfway through the generation's projector asks until this thread
        // stores the byte.
        const t = fresh();
        try {
            const inGraph = await cancelFromMain(s.probe, s.byte, Math.floor(s.genAsks / 2),
                () => t.generateAsync(s.run), GEN_WAIT_MS);
            const g = inGraph.value;
            assert.equal(g.status, CANCELLED, g.result.message);
            assert.equal(g.result.stop_reason, llamaCancel.STOP.CANCELLED);
            assert.ok([TTS_STEP.GEN_CODE, TTS_STEP.GEN_WAV].includes(g.result.step), `step ${g.result.step}`);
            assert.ok(g.result.n_frames < FRAMES && g.result.finished === 0);
            assert.ok(same(t.pcm(), s.want.subarray(0, g.result.n_samples)), "the finished windows' PCM");
            assert.deepEqual(t.state(), g.result, "state(): the last call's result");
            console.log(`node tts (${pipeline.name}): stopped from the main thread in step ${g.result.step} after ` +
                `${g.result.n_frames} frames, ${inGraph.ms.toFixed(2)} ms after the store`);
            await resumeAndCheck(t);
        } finally {
            t.free();
        }
    });

    test('stopped from a JS onFrame callback on the main thread, resumed bit for bit', async () => {
        // Run on this (the main) thread while the worker waits for it, the callback stores the byte
        // at frame 2: the generation stops between steps with 2 frames.
        const t = fresh();
        try {
            s.probe.arm(0);
            const seen = [];
            let refused = null;
            const between = await bounded(t.generateAsync({
                ...s.run,
                onFrame: (n, samples) => {
                    seen.push([n, samples]);
                    if (n === 2) {
                        try {
                            t.pcm();
                        } catch (e) {
                            refused = e.message; // a call is running: not read while it writes
                        }
                        s.byte.set();
                    }
                    return true;
                },
            }), 'the onFrame run');
            assert.equal(between.status, CANCELLED, between.result.message);
            assert.deepEqual([between.result.step, between.result.n_frames], [TTS_STEP.BETWEEN, 2]);
            assert.deepEqual(seen.map(([n]) => n), [1, 2]);
            assert.match(refused || '', /already running/);
            await resumeAndCheck(t);
        } finally {
            t.free();
        }
    });

    test('partial PCM is the finished windows; flush adds the pending frame', async () => {
        const t = fresh();
        const part = t.generate({ ...s.run, nFrames: WINDOW + 1 });
        assert.equal(part.status, OK, part.result.message);
        assert.deepEqual([part.result.n_frames, part.result.n_frames_pending, part.result.n_samples],
            [WINDOW + 1, 1, WINDOW * 1920]);
        assert.ok(same(t.pcm(), s.want.subarray(0, WINDOW * 1920)));
        const flushed = await bounded(t.flushAsync(s.run), 'the flush');
        assert.equal(flushed.status, OK, flushed.result.message);
        assert.deepEqual([flushed.result.n_samples, flushed.result.finished], [(WINDOW + 1) * 1920, 1]);
        t.free();
        assert.throws(() => t.generate(s.run), /was freed/);
    });

    test('bad input is a clear error', () => {
        s.lib.llama.llama_memory_clear(s.mem, true);
        let bad = s.lib.tts(s.lctx, s.mctx, null);
        assert.equal(bad.tts, null);
        assert.equal(bad.status, ERROR);
        assert.match(bad.message, /text/);
        if (pipeline.kind === MTMD_GEN_AUDIO_TYPE.QWEN3TTS) { // the language is Qwen3-TTS's prompt alone
            bad = s.lib.tts(s.lctx, s.mctx, TEXT, { lang: 'klingon' });
            assert.equal(bad.tts, null);
            assert.notEqual(bad.message, '');
        }
        const nul = s.lib.genAudioProcess(s.mctx, null, null, { byte: s.byte, mtmdHook: s.mtmdHook });
        assert.equal(nul.status, ERROR);
        assert.deepEqual(nul.result, { status: ERROR, step: TTS_STEP.NONE, reach: REACH.GRAPH, message: 'inp is NULL' });
    });

    if (pipeline.kind !== MTMD_GEN_AUDIO_TYPE.POCKETTTS) return;

    test('a voiced two-chunk text stopped from the main thread in its second chunk, resumed bit for bit', async () => {
        // LONG_TEXT: the first chunk's end rewinds the backbone to the voice prefix and decodes the
        // second chunk. The probe holds a projector node of the second chunk's third frame.
        const samples = noise(3);
        const voice = s.lib.mtmd.mtmd_bitmap_init_from_audio(samples.length, samples);
        assert.ok(voice, 'the voice bitmap');
        try {
            // Frame by frame, to learn the frames of the first chunk (the call that ends it also
            // prompts the second).
            let first = -1;
            let t = fresh(LONG_TEXT, { maxFrames: 1000, voice });
            try {
                while (first < 0) {
                    const r = t.generate({ ...s.run, nFrames: 1 });
                    assert.equal(r.status, OK, r.result.message);
                    assert.equal(r.result.finished, 0, 'the long text ended in one chunk');
                    if (r.result.n_chunks_done === 1) first = r.result.n_frames - 1;
                }
            } finally {
                t.free();
            }
            const frames = first + 5; // a few frames of the second chunk
            s.probe.arm(0);
            t = fresh(LONG_TEXT, { maxFrames: frames, voice });
            let ref;
            let want;
            try {
                ref = await runCounting(t, 'the voiced reference run');
                want = t.pcm();
            } finally {
                t.free();
            }
            assert.equal(ref.status, OK, ref.result.message);
            assert.deepEqual([ref.result.n_frames, ref.result.n_chunks_done, ref.result.finished], [frames, 2, 1]);
            assert.ok(ref.asks[1] > s.ref.asks[1], "the voice's encode (a projector graph) ran first");

            t = fresh(LONG_TEXT, { maxFrames: frames, voice });
            try {
                // Inside frame first + 3's graphs.
                const holdAt = Math.floor((ref.asks[first + 2] + ref.asks[first + 3]) / 2);
                const inGraph = await cancelFromMain(s.probe, s.byte, holdAt, () => t.generateAsync(s.run),
                    GEN_WAIT_MS);
                const g = inGraph.value;
                assert.equal(g.status, CANCELLED, g.result.message);
                assert.ok([TTS_STEP.GEN_CODE, TTS_STEP.GEN_WAV].includes(g.result.step), `step ${g.result.step}`);
                assert.ok([first + 2, first + 3].includes(g.result.n_frames),
                    `stopped after ${g.result.n_frames} frames`);
                assert.deepEqual([g.result.n_chunks_done, g.result.finished], [1, 0]);
                assert.ok(g.result.n_samples > 0);
                assert.ok(same(t.pcm(), want.subarray(0, g.result.n_samples)), "the finished windows' PCM");
                console.log(`node tts (${pipeline.name}): second chunk stopped from the main thread in step ` +
                    `${g.result.step} after ${g.result.n_frames} frames (${first} in the first chunk)`);
                await resumeAndCheck(t, want, ref.result);
            } finally {
                t.free();
            }
        } finally {
            s.lib.mtmd.mtmd_bitmap_free(voice);
        }
    });
}

for (const pipeline of PIPELINES) {
    describe(pipeline.name, () => pipelineTests(pipeline));
}
