"""llama_cancel_embed through the module: pooled rows of many sequences on a worker thread, stopped
by a byte the main thread stores while a graph of the second group runs; the finished sequences'
rows are the uninterrupted call's bit for bit, and the resume completes every row (tiny model
pooled by its mean)."""
import unittest

import llama_cancel

import host

N_SEQS, N_UBATCH = 8, 32


class EmbedCancelledFromMainThread(host.ModelTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.probe = host.Probe(cls.byte)
        # sequences of 10..24 tokens: two or three to a group of N_UBATCH tokens
        cls.seqs = [host.tokens(10 + 2 * s, seed=7919 + s) for s in range(N_SEQS)]

    @classmethod
    def tearDownClass(cls):
        cls.probe.close()
        super().tearDownClass()

    def context(self):
        return self.lib.context(self.model, n_ctx=1024, n_batch=512, n_ubatch=N_UBATCH, n_seq_max=N_SEQS,
                                n_threads=2, n_threads_batch=2, embeddings=True, pooling_type=1,
                                op_offload=False, offload_kqv=False)

    def test_a_stop_keeps_finished_sequences_and_resumes_bit_for_bit(self):
        ctx = self.context()
        try:
            status, result, want = self.lib.embed(ctx, self.seqs)
            self.assertEqual(status, llama_cancel.OK, result.message)
            self.assertTrue(all(r is not None for r in want))
            self.assertGreater(result.n_calls, 1)
        finally:
            self.lib.llama.llama_free(ctx)

        ctx = self.context()
        try:
            self.probe.arm(0)
            self.lib.embed(ctx, self.seqs[:2], abort_callback=self.probe.abort_callback,
                           abort_callback_data=self.probe.ptr)
            per_group = self.probe.calls()  # abort calls of about one group's graph
            self.lib.llama.llama_memory_clear(self.lib.llama.llama_get_memory(ctx), True)
            (status, result, rows), _ = host.CrossThreadCancel(self.probe, self.byte).run(
                self, lambda: self.lib.embed(ctx, self.seqs, self.byte, abort_callback=self.probe.abort_callback,
                                             abort_callback_data=self.probe.ptr),
                hold_at=per_group + per_group // 2)
            self.assertEqual(status, llama_cancel.CANCELLED, result.message)
            done = result.n_seq_done
            self.assertGreater(done, 0, "the first group finished before the store")
            self.assertLess(done, N_SEQS)
            self.assertEqual(rows[:done], want[:done])
            self.assertTrue(all(r is None for r in rows[done:]))
            status, result, rows = self.lib.embed(ctx, self.seqs, self.byte, first=done, out=rows.out)
            self.assertEqual(status, llama_cancel.OK, result.message)
            self.assertEqual(rows, want, "the resumed rows are the uninterrupted call's")
        finally:
            self.lib.llama.llama_free(ctx)


if __name__ == "__main__":
    unittest.main()
