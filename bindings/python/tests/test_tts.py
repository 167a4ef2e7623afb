"""Text-to-speech (llama_cancel_tts_*) through the module, on both pipelines libmtmd generates audio
with, each a tiny pair of scripts/make_tts.py: Qwen3-TTS (LLAMA_CANCEL_TTS_MODEL /
LLAMA_CANCEL_TTS_MMPROJ) and Pocket-TTS (LLAMA_CANCEL_TTS_POCKET_MODEL / LLAMA_CANCEL_TTS_POCKET_MMPROJ),
on the CPU. The same tests run on each (TtsCases, one unittest.TestCase subclass per pipeline at the
end: pytest's parametrize does not reach unittest classes): a generation to its end; a generation on
a worker thread (Tts.start) stopped from the main thread inside a clip graph (the probe chained
behind the projector's hook holds a graph node until the store) and after a frame the worker
reported (a Python on_frame callback waits for the store), each resumed to the uninterrupted run's
PCM bit for bit; partial PCM and flush; bad input answered with clear errors. Pocket-TTS alone: a
voice reference and a two-chunk text, stopped from the main thread inside a graph of the second
chunk (after the backbone's rewind to the voice prefix) and resumed bit for bit.
No sleep anywhere: every wait is on the other thread's report, bounded. One compute thread per
context: ggml's spinning workers on a loaded two-core machine can slow a generation many times over."""
import array
import ctypes as C
import threading
import unittest

import llama_cancel
from llama_cancel import mtmd

import host

TEXT = "Hello world, this is a test."
WINDOW = 3  # frames per GEN_WAV: several windows in a short generation
FRAMES = 7  # frames in all: windows of 3, 3 and the final 1
GEN_WAIT_S = 120  # a whole generation on the worker (seconds alone), bounded
# Pocket-TTS on the tiny pair: 8 tokens, then 47 (over 50 together): two text chunks (tests/test_tts.cpp's).
LONG_TEXT = "Hello world. Hello world and more words here and there and everywhere again and again until the end."


class TtsCases:
    """The tests, on the pipeline a subclass names (not a TestCase itself: collected only there)."""
    NAME = MODEL_ENV = MMPROJ_ENV = None  # the pipeline; its pair's paths, from CTest's environment
    KIND = None  # what mtmd_gen_audio_get_info says of the projector

    @classmethod
    def setUpClass(cls):
        cls.lib = lib = host.lib()
        if not lib.has_mtmd:
            raise unittest.SkipTest("library built without libmtmd")
        cls.model, res = lib.model_load(host.env(cls.MODEL_ENV))
        assert cls.model, res.message
        cls.byte = llama_cancel.Byte()
        cls.probe = host.Probe(cls.byte)
        cls.hook = lib.hook(cls.byte)
        # The projector's hook (its cb_eval) with the probe chained behind it: GEN_CODE and GEN_WAV
        # graph nodes are counted, and one of them can wait for the main thread's store.
        cls.mtmd_hook = lib.hook(cls.byte, chain=cls.probe.eval_callback, chain_data=cls.probe.ptr)
        # The backbone's context: embeddings on (its hidden states feed GEN_CODE).
        cls.lctx = lib.context(cls.model, hook=cls.hook, n_ctx=1024, n_batch=16, n_ubatch=16, n_threads=1,
                               n_threads_batch=1, embeddings=True, op_offload=False, no_perf=True)
        assert cls.lctx, "no backbone context"
        cls.mem = lib.llama.llama_get_memory(cls.lctx)
        cls.mctx, res = lib.mtmd_init(host.env(cls.MMPROJ_ENV), cls.model, cls.mtmd_hook, n_threads=1)
        assert cls.mctx, res.message
        cls.kind = lib.mtmd.mtmd_gen_audio_get_info(cls.mctx).type

        cls.probe.arm(0)
        with cls.new() as t:
            status, r, asks = cls.run_counting(t)
            assert status == llama_cancel.OK, r.message
            cls.want, cls.want_result = t.pcm_bytes(), r
        cls.gen_asks = cls.probe.calls()  # the projector graphs' asks in a whole generation
        cls.first_frame_asks = asks[1]  # of them, those up to frame 1

    @classmethod
    def tearDownClass(cls):
        cls.lib.mtmd.mtmd_free(cls.mctx)
        cls.lib.llama.llama_free(cls.lctx)
        cls.lib.llama_cancel_hook_free(cls.mtmd_hook)
        cls.lib.llama_cancel_hook_free(cls.hook)
        cls.lib.llama.llama_model_free(cls.model)
        cls.probe.close()

    @classmethod
    def new(cls, text=TEXT, max_frames=FRAMES, **kw):
        """A generation on an emptied sequence 0; fails the test with the library's message."""
        cls.lib.llama.llama_memory_clear(cls.mem, True)
        cls.byte.clear()
        t, r = cls.lib.tts(cls.lctx, cls.mctx, text, seed=42, window=WINDOW, max_frames=max_frames, **kw)
        assert t is not None, r.message
        return t

    @classmethod
    def run_all(cls, t, **kw):
        return t.generate(cls.byte, hook=cls.hook, mtmd_hook=cls.mtmd_hook, **kw)

    @classmethod
    def run_counting(cls, t):
        """run_all, with the probe's count of projector asks at each frame: (status, result, asks),
        asks[n] the asks once frame n was committed (asks[0]: 0)."""
        asks = [0]

        def on_frame(n_frames, _n_samples):
            asks.append(cls.probe.calls())
            assert len(asks) == n_frames + 1
            return True
        status, r = cls.run_all(t, on_frame=on_frame)
        return status, r, asks

    def resume_and_check(self, t, want=None, want_result=None):
        if want is None:
            want, want_result = self.want, self.want_result
        self.byte.clear()
        self.probe.arm(0)
        status, r = self.run_all(t)
        self.assertEqual(status, llama_cancel.OK, r.message)
        self.assertEqual((r.finished, r.n_frames, r.n_frames_pending, r.n_chunks_done),
                         (1, want_result.n_frames, 0, want_result.n_chunks_done))
        self.assertEqual(r.n_samples, want_result.n_samples)
        self.assertTrue(t.pcm_bytes() == want, "the resumed generation's PCM is the uninterrupted run's, bit for bit")

    def test_generates_to_the_end(self):
        r = self.want_result
        self.assertEqual(self.kind, self.KIND)
        self.assertEqual((r.status, r.stop_reason, r.step), (llama_cancel.OK, llama_cancel.STOP_LENGTH,
                                                             llama_cancel.TTS_STEP_NONE))
        self.assertEqual((r.finished, r.n_frames, r.n_frames_pending, r.n_chunks_done), (1, FRAMES, 0, 1))
        self.assertEqual(r.sample_rate, 24000)
        self.assertEqual(r.n_samples, FRAMES * 1920)
        self.assertEqual(len(self.want), 4 * r.n_samples)
        self.assertGreater(self.gen_asks, 0, "no GEN_CODE or GEN_WAV node reached the hook bound to mctx")
        with self.new() as t:
            self.assertEqual(self.run_all(t)[0], llama_cancel.OK)
            pcm = t.pcm()
            self.assertIsInstance(pcm, array.array)
            self.assertEqual(pcm.tobytes(), self.want, "two uninterrupted runs agree")
            self.assertTrue(any(x != 0.0 for x in pcm))
            # Finished: a further call changes nothing.
            status, r = self.run_all(t)
            self.assertEqual((status, r.n_frames, r.finished), (llama_cancel.OK, FRAMES, 1))
            self.assertEqual(t.state().n_samples, FRAMES * 1920)

    def test_stopped_inside_a_graph_from_the_main_thread_and_resumed(self):
        """Tts.start: generate on a worker thread; the probe holds a projector graph node halfway
        through the generation until this thread stores the byte."""
        with self.new() as t:
            hold_at = self.gen_asks // 2
            self.probe.arm(hold_at)
            worker = t.start(self.byte, hook=self.hook, mtmd_hook=self.mtmd_hook)
            started = self.probe.so.host_probe_wait_started(self.probe.ptr, GEN_WAIT_S * 1000)
            self.byte.set()  # the cancel: one byte store, from the main thread
            status, r = worker.wait(GEN_WAIT_S)
            self.assertTrue(started, f"the worker never reached ask {hold_at} (of {self.probe.calls()})")
            self.assertFalse(self.probe.so.host_probe_timed_out(self.probe.ptr), "the probe never saw the store")
            self.assertEqual(self.probe.so.host_probe_decode_tid(self.probe.ptr), worker.native_id,
                             "the graphs ran on the worker thread")
            self.assertEqual(self.probe.so.host_probe_off_thread(self.probe.ptr), 0)
            self.assertEqual(status, llama_cancel.CANCELLED, r.message)
            self.assertEqual(r.stop_reason, llama_cancel.STOP_CANCELLED)
            self.assertIn(r.step, (llama_cancel.TTS_STEP_GEN_CODE, llama_cancel.TTS_STEP_GEN_WAV), r.step)
            self.assertLess(r.n_frames, FRAMES)
            self.assertEqual(r.finished, 0)
            self.assertEqual(t.state().n_frames, r.n_frames)
            self.assertEqual(len(t.pcm_bytes()), 4 * r.n_samples)
            self.assertEqual(t.pcm_bytes(), self.want[:4 * r.n_samples], "the finished windows' PCM")
            print(f"\npython tts ({self.NAME}): stopped from the main thread in "
                  f"{llama_cancel.abi.TTS_STEP_NAMES[r.step]} after {r.n_frames} frames, resumed", flush=True)
            self.resume_and_check(t)

    def test_stopped_after_a_reported_frame_and_resumed(self):
        """A Python on_frame callback reports frame 2 and waits (bounded) until this thread stored
        the byte: the generation stops between steps with 2 frames, and resumes."""
        reported, stored = threading.Event(), threading.Event()
        seen = []

        def on_frame(n_frames, n_samples):
            seen.append((n_frames, n_samples, threading.get_native_id()))
            if n_frames == 2:
                reported.set()
                stored.wait(host.WAIT_MS / 1000)
            return True

        with self.new() as t:
            self.probe.arm(0)
            worker = t.start(self.byte, hook=self.hook, mtmd_hook=self.mtmd_hook, on_frame=on_frame)
            self.assertTrue(reported.wait(GEN_WAIT_S), "the worker never reported frame 2")
            with self.assertRaises(RuntimeError):
                t.pcm()  # a call is running: refused, not read while it writes
            self.byte.set()  # the cancel, from the main thread
            stored.set()
            status, r = worker.wait(GEN_WAIT_S)
            self.assertEqual(status, llama_cancel.CANCELLED, r.message)
            self.assertEqual((r.step, r.n_frames), (llama_cancel.TTS_STEP_BETWEEN, 2))
            self.assertEqual([s[0] for s in seen], [1, 2])
            self.assertEqual({s[2] for s in seen}, {worker.native_id}, "on_frame ran on the generating thread")
            self.resume_and_check(t)

    def test_on_frame_false_or_raising_stops(self):
        with self.new() as t:
            status, r = self.run_all(t, on_frame=lambda n, _: n < 3)
            self.assertEqual((status, r.step, r.n_frames), (llama_cancel.CANCELLED, llama_cancel.TTS_STEP_BETWEEN, 3))

            def boom(n, _):
                raise KeyError("from on_frame")
            with self.assertRaises(KeyError):
                self.run_all(t, on_frame=boom)
            self.assertEqual(t.state().n_frames, 4, "the frame before the exception is kept")
            self.resume_and_check(t)

    def test_partial_pcm_is_the_finished_windows_and_flush_ends(self):
        with self.new() as t:
            status, r = self.run_all(t, n_frames=WINDOW + 1)
            self.assertEqual(status, llama_cancel.OK, r.message)
            self.assertEqual((r.n_frames, r.n_frames_pending, r.finished), (WINDOW + 1, 1, 0))
            self.assertEqual(r.n_samples, WINDOW * 1920)
            self.assertEqual(t.pcm_bytes(), self.want[:4 * WINDOW * 1920])
            status, r = t.flush(self.byte)
            self.assertEqual(status, llama_cancel.OK, r.message)
            self.assertEqual((r.n_samples, r.finished, r.n_frames_pending), ((WINDOW + 1) * 1920, 1, 0))

    def test_bad_input_is_a_clear_error(self):
        lib = self.lib
        lib.llama.llama_memory_clear(self.mem, True)
        t, r = lib.tts(self.lctx, self.mctx, None)
        self.assertIsNone(t)
        self.assertEqual(r.status, llama_cancel.ERROR)
        self.assertIn(b"text", r.message)
        if self.KIND == mtmd.MTMD_GEN_AUDIO_TYPE_QWEN3TTS:  # the language is Qwen3-TTS's prompt alone
            t, r = lib.tts(self.lctx, self.mctx, TEXT, lang="klingon")
            self.assertIsNone(t)
            self.assertEqual(r.status, llama_cancel.ERROR)
            self.assertNotEqual(r.message, b"")
        t, r = lib.tts(self.lctx, None, TEXT)
        self.assertIsNone(t)
        self.assertNotEqual(r.message, b"")
        r = llama_cancel.llama_cancel_tts_result()
        self.assertEqual(lib.llama_cancel_tts_generate(None, None, C.byref(r)), llama_cancel.ERROR)
        self.assertNotEqual(r.message, b"")

        with self.new() as t:
            status, r = self.run_all(t, n_frames=1)
            self.assertEqual(status, llama_cancel.OK, r.message)
            # A generation starts on an empty sequence.
            t2, r = lib.tts(self.lctx, self.mctx, TEXT)
            self.assertIsNone(t2)
            self.assertIn(b"not empty", r.message)
            # Another hook than the one bound to mctx: an error that computes nothing.
            other = lib.hook(self.byte)
            try:
                before = lib.llama.llama_memory_seq_pos_max(self.mem, 0)
                status, r = t.generate(self.byte, hook=self.hook, mtmd_hook=other)
                self.assertEqual(status, llama_cancel.ERROR)
                self.assertIn(b"mtmd_hook", r.message)
                self.assertEqual((t.state().status, t.state().message), (llama_cancel.ERROR, r.message),
                                 "state(): the last call's result")
                self.assertEqual(lib.llama.llama_memory_seq_pos_max(self.mem, 0), before)
            finally:
                lib.llama_cancel_hook_free(other)
            self.resume_and_check(t)
        with self.assertRaises(ValueError):
            t.generate(self.byte)  # closed

        # llama_cancel_mtmd_gen_audio_process: no input, a clear error; a GEN_CODE step runs.
        status, r = lib.gen_audio_process(self.mctx, None, mtmd.mtmd_gen_out(), self.byte)
        self.assertIsInstance(r, llama_cancel.llama_cancel_gen_audio_result)
        self.assertEqual((status, r.status), (llama_cancel.ERROR, llama_cancel.ERROR))
        self.assertEqual(r.message, b"inp is NULL")
        inp = lib.mtmd.mtmd_gen_inp_default(self.mctx)
        h = (C.c_float * lib.llama.llama_model_n_embd(self.model))(*([0.01] * lib.llama.llama_model_n_embd(self.model)))
        inp.type, inp.embd, inp.seed = mtmd.MTMD_GEN_PROCESS_TYPE_GEN_CODE, h, 7
        out = mtmd.mtmd_gen_out()
        self.probe.arm(0)
        status, r = lib.gen_audio_process(self.mctx, inp, out, self.byte, mtmd_hook=self.mtmd_hook)
        self.assertEqual(status, llama_cancel.OK, r.message)
        self.assertEqual((r.status, r.step, r.message), (llama_cancel.OK, llama_cancel.TTS_STEP_NONE, b""))
        if self.KIND == mtmd.MTMD_GEN_AUDIO_TYPE_QWEN3TTS:
            self.assertGreater(out.n_codes, 0, "the code predictor's codebooks")
        else:
            self.assertEqual((out.n_codes, out.n_feats > 0), (0, True), "the flow step's latent")
        # The byte set: CANCELLED at GEN_CODE, libmtmd's garbage output zeroed.
        self.byte.set()
        try:
            status, r = lib.gen_audio_process(self.mctx, inp, out, self.byte, mtmd_hook=self.mtmd_hook)
        finally:
            self.byte.clear()
        self.assertEqual((status, r.status, r.step), (llama_cancel.CANCELLED, llama_cancel.CANCELLED,
                                                      llama_cancel.TTS_STEP_GEN_CODE))
        self.assertEqual((out.n_codes, out.n_feats, bool(out.embd)), (0, 0, False))


class TestQwen3Tts(TtsCases, unittest.TestCase):
    NAME, MODEL_ENV, MMPROJ_ENV = "qwen3tts", "LLAMA_CANCEL_TTS_MODEL", "LLAMA_CANCEL_TTS_MMPROJ"
    KIND = mtmd.MTMD_GEN_AUDIO_TYPE_QWEN3TTS


class TestPocketTts(TtsCases, unittest.TestCase):
    NAME, MODEL_ENV, MMPROJ_ENV = "pockettts", "LLAMA_CANCEL_TTS_POCKET_MODEL", "LLAMA_CANCEL_TTS_POCKET_MMPROJ"
    KIND = mtmd.MTMD_GEN_AUDIO_TYPE_POCKETTTS

    def test_second_chunk_stopped_from_the_main_thread_and_resumed(self):
        """A voice reference and LONG_TEXT: the first chunk's end rewinds the backbone to the voice
        prefix and decodes the second chunk. The probe holds a projector node of the second chunk's
        third frame until this thread stores the byte; the resume gives the uninterrupted run's PCM."""
        lib = self.lib
        # One second of noise as the voice reference (16 kHz mono), as tests/mtmd_media.h makes it.
        x, noise = 3 * 2654435761 + 1 & 0xFFFFFFFF, []
        for _ in range(16000):
            x ^= x << 13 & 0xFFFFFFFF
            x ^= x >> 17
            x ^= x << 5 & 0xFFFFFFFF
            noise.append(0.2 * ((x % 2001) / 1000.0 - 1.0))
        voice = lib.mtmd.mtmd_bitmap_init_from_audio(len(noise), (C.c_float * len(noise))(*noise))
        self.assertTrue(voice)
        try:
            # Frame by frame, to learn the frames of the first chunk (the call that ends it also
            # prompts the second).
            first = None
            with self.new(LONG_TEXT, max_frames=1000, voice=voice) as t:
                while first is None:
                    status, r = self.run_all(t, n_frames=1)
                    self.assertEqual(status, llama_cancel.OK, r.message)
                    self.assertEqual(r.finished, 0, "the long text ended in one chunk")
                    if r.n_chunks_done == 1:
                        first = r.n_frames - 1
            frames = first + 5  # a few frames of the second chunk
            self.probe.arm(0)
            with self.new(LONG_TEXT, max_frames=frames, voice=voice) as t:
                status, want_result, asks = self.run_counting(t)
                self.assertEqual(status, llama_cancel.OK, want_result.message)
                want = t.pcm_bytes()
            self.assertEqual((want_result.n_frames, want_result.n_chunks_done, want_result.finished), (frames, 2, 1))
            self.assertGreater(asks[1], self.first_frame_asks, "the voice's encode (a projector graph) ran first")

            with self.new(LONG_TEXT, max_frames=frames, voice=voice) as t:
                hold_at = (asks[first + 2] + asks[first + 3]) // 2  # inside frame first + 3's graphs
                self.probe.arm(hold_at)
                worker = t.start(self.byte, hook=self.hook, mtmd_hook=self.mtmd_hook)
                started = self.probe.so.host_probe_wait_started(self.probe.ptr, GEN_WAIT_S * 1000)
                self.byte.set()  # the cancel, from the main thread
                status, r = worker.wait(GEN_WAIT_S)
                self.assertTrue(started, f"the worker never reached ask {hold_at} (of {self.probe.calls()})")
                self.assertFalse(self.probe.so.host_probe_timed_out(self.probe.ptr), "the probe never saw the store")
                self.assertEqual(status, llama_cancel.CANCELLED, r.message)
                self.assertIn(r.step, (llama_cancel.TTS_STEP_GEN_CODE, llama_cancel.TTS_STEP_GEN_WAV), r.step)
                self.assertIn(r.n_frames, (first + 2, first + 3), "stopped in the second chunk's third frame")
                self.assertEqual((r.n_chunks_done, r.finished), (1, 0))
                self.assertGreater(r.n_samples, 0)
                self.assertEqual(t.pcm_bytes(), want[:4 * r.n_samples], "the finished windows' PCM")
                print(f"\npython tts ({self.NAME}): second chunk stopped from the main thread in "
                      f"{llama_cancel.abi.TTS_STEP_NAMES[r.step]} after {r.n_frames} frames "
                      f"({first} in the first chunk), resumed", flush=True)
                self.resume_and_check(t, want, want_result)
        finally:
            lib.mtmd.mtmd_bitmap_free(voice)


if __name__ == "__main__":
    unittest.main()
