"""The token loop on a worker thread, stopped from the main thread between tokens and inside the
prompt's prefill, then resumed to the tokens an uninterrupted run gives."""
import unittest

import llama_cancel

import host

N_PROMPT, N_PREDICT = 48, 8


class GenerateCancelledFromMainThread(host.ModelTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        lib = cls.lib
        # One probe chained behind the hook holds a prefill graph; another, as on_token, the loop.
        cls.probe = host.Probe(cls.byte)
        cls.token_probe = host.Probe(cls.byte)
        cls.hook = lib.hook(cls.byte, chain=cls.probe.eval_callback, chain_data=cls.probe.ptr)
        cls.ctx = lib.context(cls.model, hook=cls.hook, n_ctx=256, n_batch=16, n_ubatch=16, n_threads=2,
                              n_threads_batch=2)
        cls.mem = lib.llama.llama_get_memory(cls.ctx)
        cls.prompt = host.tokens(N_PROMPT)

    @classmethod
    def tearDownClass(cls):
        cls.lib.llama.llama_free(cls.ctx)
        cls.lib.llama_cancel_hook_free(cls.hook)
        cls.probe.close()
        cls.token_probe.close()
        super().tearDownClass()

    def fresh(self):
        self.lib.llama.llama_memory_clear(self.mem, True)

    def generate(self, prompt, n_predict, **kw):
        return self.lib.generate(self.ctx, prompt, n_predict, self.byte, hook=self.hook, **kw)

    def reference(self):
        self.fresh()
        self.probe.arm(0)
        status, result, out = self.generate(self.prompt, N_PREDICT)
        self.assertEqual(status, llama_cancel.OK, result.message)
        return out

    def test_prompt_in_smaller_decodes_generates_the_same(self):
        ref = self.reference()
        self.fresh()
        status, result, out = self.generate(self.prompt, N_PREDICT, n_batch=8)  # the context's n_batch is 16
        self.assertEqual(status, llama_cancel.OK, result.message)
        self.assertEqual((result.n_prompt_committed, result.n_past), (N_PROMPT, N_PROMPT + result.n_generated_committed))
        self.assertEqual(out, ref)

    def test_stop_between_tokens(self):
        ref = self.reference()
        self.fresh()
        cancel = host.CrossThreadCancel(self.token_probe, self.byte)
        (status, result, out), ms = cancel.run(
            self, lambda: self.generate(self.prompt, N_PREDICT, on_token=self.token_probe.on_token,
                                        on_token_data=self.token_probe.ptr), 3)
        self.assertEqual(status, llama_cancel.CANCELLED, result.message)
        self.assertEqual(result.stop_reason, llama_cancel.STOP_CANCELLED)
        self.assertEqual(out, ref[:3])
        self.assertEqual(result.n_prompt_committed, N_PROMPT)
        self.assertEqual(result.n_past, N_PROMPT + result.n_generated_committed)
        self.assertEqual(self.lib.llama.llama_memory_seq_pos_max(self.mem, 0), result.n_past - 1)
        print(f"\npython token loop: stopped after token 3 from the main thread, {ms:.2f} ms after the store",
              flush=True)

    def test_stop_in_the_prefill_and_resume(self):
        ref = self.reference()
        self.fresh()
        self.probe.arm(0)
        self.generate(self.prompt, 0)
        n_asks = self.probe.calls()
        self.fresh()
        cancel = host.CrossThreadCancel(self.probe, self.byte)
        (status, result, out), ms = cancel.run(self, lambda: self.generate(self.prompt, N_PREDICT), n_asks * 6 // 10)
        self.assertEqual(status, llama_cancel.CANCELLED, result.message)
        self.assertEqual(out, [])
        self.assertLess(result.n_prompt_committed, N_PROMPT)
        self.assertEqual(self.lib.llama.llama_memory_seq_pos_max(self.mem, 0), result.n_prompt_committed - 1)
        self.probe.arm(0)
        status, result2, out = self.generate(self.prompt[result.n_prompt_committed:], N_PREDICT)
        self.assertEqual(status, llama_cancel.OK, result2.message)
        self.assertEqual(out, ref, "the resumed run generates what an uninterrupted one does")


if __name__ == "__main__":
    unittest.main()
