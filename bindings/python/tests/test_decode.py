"""llama_cancel_decode on a worker thread, stopped by a byte the main thread stores: every decode
returns CANCELLED with whole ubatches in memory, and resumes. The worst latency from the store to
the worker's return is printed beside the decode time (a figure, not an assertion)."""
import statistics
import unittest

import llama_cancel

import host

N_TOKENS, N_UBATCH, RUNS = 256, 64, 10


class DecodeCancelledFromMainThread(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.lib = lib = host.lib()
        cls.model, res = lib.model_load(host.env("LLAMA_CANCEL_BENCH_MODEL"))
        assert cls.model, res.message
        cls.ctx = lib.context(cls.model, n_ctx=512, n_batch=N_TOKENS, n_ubatch=N_UBATCH, n_threads=2,
                              n_threads_batch=2, op_offload=False, offload_kqv=False)
        cls.mem = lib.llama.llama_get_memory(cls.ctx)
        cls.flag = llama_cancel.Flag()
        cls.probe = host.Probe(cls.flag)

    @classmethod
    def tearDownClass(cls):
        cls.probe.close()
        cls.lib.llama.llama_free(cls.ctx)
        cls.lib.llama.llama_model_free(cls.model)

    def setUp(self):
        self.flag.clear()  # whatever a failed test left

    def decode(self, toks):
        batch, keep = self.lib.tokens_batch(toks)
        return self.lib.decode(self.ctx, batch, self.flag, abort_callback=self.probe.abort_callback,
                               abort_callback_data=self.probe.ptr, n_seq=1)

    def fresh(self):
        self.lib.llama.llama_memory_clear(self.mem, True)

    def test_every_decode_stops_and_resumes(self):
        toks = host.tokens(N_TOKENS)
        self.probe.arm(0)

        def clean():
            self.fresh()
            return self.decode(toks)
        decode_ms, (status, result, _) = host.timed(clean)
        self.assertEqual(status, llama_cancel.OK)
        want = self.lib.logits_ith(self.ctx, result, N_TOKENS - 1)
        self.assertTrue(want, "the clean decode has its last output")
        n_calls = self.probe.calls() // 3  # three clean decodes since armed
        self.assertGreater(n_calls, 0)

        cancel = host.CrossThreadCancel(self.probe, self.flag)
        latencies = []
        for i in range(RUNS):
            self.fresh()
            hold_at = int(n_calls * (0.3 + 0.36 * i / (RUNS - 1)))
            (status, result, seqs), ms = cancel.run(self, lambda: self.decode(toks), hold_at)
            latencies.append(ms)
            self.assertEqual(status, llama_cancel.CANCELLED, result.message)
            self.assertEqual(result.status, llama_cancel.CANCELLED)
            self.assertEqual(result.n_committed % N_UBATCH, 0, "only whole ubatches are committed")
            self.assertLess(result.n_committed, N_TOKENS)
            self.assertEqual([(q.n_committed, q.output, q.cancelled) for q in seqs], [(result.n_committed, -1, 0)])
            self.assertEqual(self.lib.llama.llama_memory_seq_pos_max(self.mem, 0), result.n_committed - 1)

        # Resume the last one from its committed position: the last token's logits, read by batch
        # index, are those of an uninterrupted decode.
        rest = toks[result.n_committed:]
        status, result, _ = self.decode(rest)
        self.assertEqual(status, llama_cancel.OK, result.message)
        self.assertEqual(self.lib.llama.llama_memory_seq_pos_max(self.mem, 0), N_TOKENS - 1)
        resumed = self.lib.logits_ith(self.ctx, result, len(rest) - 1)
        self.assertTrue(resumed, "the resumed decode has its last output")
        self.assertEqual(resumed, want, "resumed logits are bit-identical")

        worst = max(latencies)
        print(f"\npython decode: {RUNS}/{RUNS} cancelled from the main thread; store-to-return latency "
              f"p50 {statistics.median(latencies):.2f} ms, worst {worst:.2f} ms = {100 * worst / decode_ms:.1f}% "
              f"of the decode ({decode_ms:.1f} ms, {N_TOKENS} tokens)", flush=True)

    def test_byte_set_before_the_call(self):
        self.fresh()
        self.flag.set()
        batch, keep = self.lib.tokens_batch(host.tokens(8))
        status, result, _ = self.lib.decode(self.ctx, batch, self.flag)
        self.flag.clear()
        self.assertEqual(status, llama_cancel.CANCELLED)
        self.assertEqual(result.n_committed, 0)
        self.assertEqual(self.lib.llama.llama_memory_seq_pos_max(self.mem, 0), -1)

    def test_errors_say_why(self):
        batch, keep = self.lib.tokens_batch([1])
        status, result, _ = self.lib.decode(None, batch, self.flag)
        self.assertEqual(status, llama_cancel.ERROR)
        self.assertIn(b"NULL", result.message)


if __name__ == "__main__":
    unittest.main()
