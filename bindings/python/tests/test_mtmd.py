"""Multimodal: llama_cancel_mtmd_eval_chunks on a worker thread, stopped from the main thread
inside the clip encode of an image chunk (synthetic projector), then resumed to the logits of an
uninterrupted evaluation, bit for bit; the token loop goes on from those logits (generate_mtmd: the
evaluation, then llama_cancel_generate with no prompt). A library built without libmtmd answers with
a clear error."""
import ctypes as C
import unittest

import llama_cancel

import host


class MtmdNullArguments(unittest.TestCase):
    def test_clear_error(self):
        """Without libmtmd every call says so; with it, NULL contexts are named."""
        lib = host.lib()
        status, result = lib.mtmd_eval_chunks(None, None, None)
        self.assertEqual(status, llama_cancel.ERROR)
        if lib.has_mtmd:
            self.assertIn(b"NULL", result.message)
        else:
            self.assertEqual(result.message, b"built without libmtmd")

    def test_unknown_option_bits(self):
        """llama_cancel_mtmd_eval_chunks refuses option bits it does not know before anything else."""
        lib = host.lib()
        status, result = lib.mtmd_eval_chunks(None, None, None, options=llama_cancel.MTMD_BATCH_ENCODE | 4)
        self.assertEqual(status, llama_cancel.ERROR)
        self.assertEqual(result.message, b"options 0x5 has unknown bits 0x4; nothing was evaluated"
                         if lib.has_mtmd else b"built without libmtmd")

    def test_generate_unknown_option_bits(self):
        """generate_mtmd passes its options to the evaluation, which refuses unknown bits: no token
        loop runs (result None), and the prompt stands where it was."""
        lib = host.lib()
        status, prompt, result, out = lib.generate_mtmd(None, None, None, 1, first_chunk=2, n_past=7,
                                                        options=llama_cancel.MTMD_BATCH_ENCODE | 4)
        self.assertEqual(status, llama_cancel.ERROR)
        self.assertEqual((prompt.status, prompt.n_chunks_done, prompt.n_past, result, out), (status, 2, 7, None, []))
        self.assertEqual(prompt.message, b"options 0x5 has unknown bits 0x4; nothing was evaluated"
                         if lib.has_mtmd else b"built without libmtmd")


class MtmdCancelledFromMainThread(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.lib = lib = host.lib()
        if not lib.has_mtmd:
            raise unittest.SkipTest("library built without libmtmd")
        cls.model, res = lib.model_load(host.env("LLAMA_CANCEL_SMALL_MODEL"))
        assert cls.model, res.message
        cls.ctx = lib.context(cls.model, n_ctx=512, n_batch=64, n_ubatch=64, n_threads=2, n_threads_batch=2)
        cls.mem = lib.llama.llama_get_memory(cls.ctx)
        cls.byte = llama_cancel.Byte()
        cls.probe = host.Probe(cls.byte)
        cls.mtmd_hook = lib.hook(cls.byte, chain=cls.probe.eval_callback, chain_data=cls.probe.ptr)
        cls.mctx, res = lib.mtmd_init(host.env("LLAMA_CANCEL_VISION_MMPROJ"), cls.model, cls.mtmd_hook, n_threads=2)
        assert cls.mctx, res.message
        pixels = (C.c_ubyte * (64 * 64 * 3))(*[(i * 37) % 251 for i in range(64 * 64 * 3)])
        cls.bitmap = lib.mtmd.mtmd_bitmap_init(64, 64, pixels)
        marker = lib.mtmd.mtmd_default_marker().decode()
        cls.chunks = lib.mtmd_tokenize(cls.mctx, f"Describe {marker} in a word.", [cls.bitmap])
        cls.n_chunks = lib.mtmd.mtmd_input_chunks_size(cls.chunks)

    @classmethod
    def tearDownClass(cls):
        m, ll = cls.lib.mtmd, cls.lib.llama
        m.mtmd_input_chunks_free(cls.chunks)
        m.mtmd_bitmap_free(cls.bitmap)
        m.mtmd_free(cls.mctx)
        cls.lib.llama_cancel_hook_free(cls.mtmd_hook)
        ll.llama_free(cls.ctx)
        ll.llama_model_free(cls.model)
        cls.probe.close()

    def evaluate(self, first_chunk=0, n_past=0, **kw):
        return self.lib.mtmd_eval_chunks(self.mctx, self.ctx, self.chunks, first_chunk, n_past, self.byte,
                                         mtmd_hook=self.mtmd_hook, n_batch=32, **kw)

    def test_stop_inside_the_encode_and_resume(self):
        self.assertGreaterEqual(self.n_chunks, 2)
        self.probe.arm(0)

        def clean():
            self.lib.llama.llama_memory_clear(self.mem, True)
            return self.evaluate()
        eval_ms, (status, result) = host.timed(clean, runs=2)
        self.assertEqual(status, llama_cancel.OK, result.message)
        want = self.lib.last_logits(self.ctx)
        self.assertTrue(want, "the clean evaluation has the last token's logits")
        n_asks = self.probe.calls() // 2  # the image chunk's encode, twice

        self.lib.llama.llama_memory_clear(self.mem, True)
        cancel = host.CrossThreadCancel(self.probe, self.byte)
        (status, result), ms = cancel.run(self, self.evaluate, n_asks // 2)
        self.assertEqual(status, llama_cancel.CANCELLED, result.message)
        self.assertGreater(result.n_chunks_done, 0, "the text before the image is in memory")
        self.assertLess(result.n_chunks_done, self.n_chunks, "the image chunk is not")
        self.assertEqual(self.lib.llama.llama_memory_seq_pos_max(self.mem, 0), result.n_past - 1)

        self.probe.arm(0)
        status, resumed = self.evaluate(result.n_chunks_done, result.n_past)
        self.assertEqual(status, llama_cancel.OK, resumed.message)
        self.assertEqual(self.lib.last_logits(self.ctx), want, "resumed logits are bit-identical")
        self.assertEqual(resumed.n_chunks_done, self.n_chunks)

        # The token loop after the chunks, from their last logits: the resumed evaluation's, and a
        # stop-free generate_mtmd's from the start (the same two calls) generate the same tokens.
        status, after, tokens = self.lib.generate(self.ctx, [], 4, self.byte)
        self.assertEqual(status, llama_cancel.OK, after.message)
        self.assertEqual((after.n_prompt_committed, after.n_past), (0, resumed.n_past + after.n_generated_committed))
        self.assertGreater(after.n_generated, 0)
        self.lib.llama.llama_memory_clear(self.mem, True)
        status, prompt, gen, out = self.lib.generate_mtmd(self.mctx, self.ctx, self.chunks, 4, byte=self.byte,
                                                          mtmd_hook=self.mtmd_hook, n_batch=32)
        self.assertEqual(status, llama_cancel.OK, gen.message)
        self.assertEqual((prompt.n_chunks_done, prompt.n_past), (self.n_chunks, resumed.n_past))
        self.assertEqual(gen.n_past, prompt.n_past + gen.n_generated_committed)
        self.assertEqual(len(out), gen.n_generated)
        self.assertEqual(out, tokens, "the same tokens from the same logits")
        print(f"\npython mtmd: encode stopped from the main thread {ms:.2f} ms after the store "
              f"({100 * ms / eval_ms:.1f}% of the {eval_ms:.1f} ms evaluation), resumed bit-identical", flush=True)


if __name__ == "__main__":
    unittest.main()
