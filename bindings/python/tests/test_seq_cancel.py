"""llama_cancel_decode with a byte per sequence (Library.decode_seqs): a batch of two sequences, one
of them cancelled from the main thread while a worker decodes; the other is whole, its output
readable, and its logits bit-identical to a decode of its tokens alone."""
import unittest

import llama_cancel

import host

N, SEQS = 64, 2


class DecodeSeqs(host.ModelTest):
    MODEL = "LLAMA_CANCEL_BENCH_MODEL"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.prompts = [host.tokens(N, seed=101 + s) for s in range(SEQS)]

    def context(self, n_seq_max):
        return self.lib.context(self.model, n_ctx=512, n_batch=N * SEQS, n_ubatch=N * SEQS, n_seq_max=n_seq_max,
                                n_threads=2, n_threads_batch=2, op_offload=False, offload_kqv=False)

    def batch(self, seqs):
        """Sequences one after another, each asking for its last token's output."""
        b = self.lib.llama.llama_batch_init(N * len(seqs), 0, 1)
        for k, s in enumerate(seqs):
            for i in range(N):
                j = k * N + i
                b.token[j], b.pos[j], b.n_seq_id[j], b.logits[j] = self.prompts[s][i], i, 1, i == N - 1
                b.seq_id[j][0] = s
        b.n_tokens = N * len(seqs)
        return b

    def logits(self, ctx, i):
        n = self.lib.llama.llama_vocab_n_tokens(self.lib.llama.llama_model_get_vocab(self.model))
        ptr = self.lib.llama.llama_get_logits_ith(ctx, i)
        return list(ptr[:n]) if ptr else None

    def alone(self, s):
        ctx = self.context(SEQS)
        b = self.batch([s])
        self.assertEqual(self.lib.llama.llama_decode(ctx, b), 0)
        want = self.logits(ctx, -1)
        self.lib.llama.llama_batch_free(b)
        self.lib.llama.llama_free(ctx)
        return want

    def test_one_sequence_cancelled_from_the_main_thread(self):
        ctx = self.context(SEQS)
        mem = self.lib.llama.llama_get_memory(ctx)
        flags = [llama_cancel.Byte(), llama_cancel.Byte()]
        probe = host.Probe(flags[0])  # holds the graph until sequence 0's byte is stored
        b = self.batch([0, 1])
        try:
            (status, result, seqs), _ = host.CrossThreadCancel(probe, flags[0]).run(
                self, lambda: self.lib.decode_seqs(ctx, b, flags, abort_callback=probe.abort_callback,
                                                   abort_callback_data=probe.ptr), 5)
            self.assertEqual(status, llama_cancel.OK, result.message)
            self.assertEqual(result.n_seq_cancelled, 1)
            self.assertEqual([q.cancelled for q in seqs], [1, 0])
            self.assertEqual([q.n_committed for q in seqs], [0, N])
            self.assertEqual(self.lib.llama.llama_memory_seq_pos_max(mem, 0), -1)
            self.assertEqual(self.lib.llama.llama_memory_seq_pos_max(mem, 1), N - 1)
            self.assertEqual(seqs[0].output, -1)
            self.assertGreaterEqual(seqs[1].output, 0)
            got, want = self.logits(ctx, seqs[1].output), self.alone(1)
            self.assertTrue(got and want, "both decodes have sequence 1's output")
            self.assertEqual(got, want, "sequence 1 as its tokens alone leave it")
        finally:
            probe.close()
            self.lib.llama.llama_batch_free(b)
            self.lib.llama.llama_free(ctx)

    def test_a_byte_set_on_entry_drops_its_sequence_only(self):
        ctx = self.context(SEQS)
        flags = [None, llama_cancel.Byte()]
        flags[1].set()
        b = self.batch([0, 1])
        try:
            mine = (llama_cancel.llama_cancel_seq_result * SEQS)()  # the caller's array, another thread may poll it
            status, result, seqs = self.lib.decode_seqs(ctx, b, flags, seqs=mine)
            self.assertEqual(status, llama_cancel.OK, result.message)
            self.assertEqual([(q.cancelled, q.n_committed) for q in seqs], [(0, N), (1, 0)])
            self.assertEqual([(q.cancelled, q.n_committed) for q in mine], [(0, N), (1, 0)])
            got, want = self.logits(ctx, seqs[0].output), self.alone(0)
            self.assertTrue(got and want, "both decodes have sequence 0's output")
            self.assertEqual(got, want)
        finally:
            self.lib.llama.llama_batch_free(b)
            self.lib.llama.llama_free(ctx)


if __name__ == "__main__":
    unittest.main()
