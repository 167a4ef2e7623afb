"""llama_cancel_decode on a worker thread, stopped by a byte the main thread stores: every decode
returns CANCELLED with whole ubatches in memory, and resumes. The worst latency from the store to
the worker's return is printed beside the decode time (a figure, not an assertion). And a prefill
stopped from inside its third ubatch: the two finished ones stay, and the resumed decode gives the
logits of an uninterrupted one bit for bit."""
import ctypes as C
import statistics
import unittest

import llama_cancel

import host

N_TOKENS, N_UBATCH, RUNS = 256, 64, 10
N_PREFILL, N_PREFILL_UBATCH = 512, 128  # four ubatches


class DecodeCancelledFromMainThread(host.ModelTest):
    MODEL = "LLAMA_CANCEL_BENCH_MODEL"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.ctx = cls.lib.context(cls.model, n_ctx=512, n_batch=N_TOKENS, n_ubatch=N_UBATCH, n_threads=2,
                                  n_threads_batch=2, op_offload=False, offload_kqv=False)
        cls.mem = cls.lib.llama.llama_get_memory(cls.ctx)
        cls.probe = host.Probe(cls.byte)

    @classmethod
    def tearDownClass(cls):
        cls.probe.close()
        cls.lib.llama.llama_free(cls.ctx)
        super().tearDownClass()

    def setUp(self):
        self.byte.clear()  # whatever a failed test left

    def decode(self, toks):
        batch, keep = self.lib.tokens_batch(toks)
        return self.lib.decode(self.ctx, batch, self.byte, abort_callback=self.probe.abort_callback,
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

        cancel = host.CrossThreadCancel(self.probe, self.byte)
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
        self.byte.set()
        batch, keep = self.lib.tokens_batch(host.tokens(8))
        status, result, _ = self.lib.decode(self.ctx, batch, self.byte)
        self.byte.clear()
        self.assertEqual(status, llama_cancel.CANCELLED)
        self.assertEqual(result.n_committed, 0)
        self.assertEqual(self.lib.llama.llama_memory_seq_pos_max(self.mem, 0), -1)

    def test_errors_say_why(self):
        batch, keep = self.lib.tokens_batch([1])
        status, result, _ = self.lib.decode(None, batch, self.byte)
        self.assertEqual(status, llama_cancel.ERROR)
        self.assertIn(b"NULL", result.message)


class DecodeReportsItsReach(host.ModelTest):
    """result.reach says where the byte was read: with a hook bound to the context, inside every
    graph (REACH_GRAPH: every backend); without an eval callback, at the abort callback's CPU nodes
    alone (REACH_CPU: a GPU's graph would have run to its end)."""

    def reach(self, hook):
        """The reach of a clean 32-token decode on a new context, `hook` bound to it (None: none)."""
        ctx = self.lib.context(self.model, hook=hook, n_ctx=64, n_batch=32, n_ubatch=32, n_threads=2,
                               n_threads_batch=2)
        self.assertTrue(ctx, "context created")
        try:
            batch, keep = self.lib.tokens_batch(host.tokens(32))
            status, result, _ = self.lib.decode(ctx, batch, self.byte, hook=hook)
            self.assertEqual(status, llama_cancel.OK, result.message)
            self.assertEqual(result.n_committed, 32)
            return result.reach
        finally:
            self.lib.llama.llama_free(ctx)

    def test_a_bound_hook_reaches_every_graph(self):
        hook = self.lib.hook(self.byte)
        try:
            reach = self.reach(hook)
        finally:
            self.lib.llama_cancel_hook_free(hook)
        self.assertEqual(reach, llama_cancel.REACH_GRAPH)
        self.assertEqual(llama_cancel.REACH_NAMES[llama_cancel.REACH_GRAPH], "graph")

    def test_no_eval_callback_reaches_the_cpu_nodes_alone(self):
        reach = self.reach(None)
        self.assertEqual(reach, llama_cancel.REACH_CPU)
        self.assertEqual(llama_cancel.REACH_NAMES[llama_cancel.REACH_CPU], "cpu")


class AskCounter:
    """An eval callback chained behind the hook that counts the scheduler's asks and, at ask
    `stop_at`, asks for the node (a checkpoint there) and stores 1 into the byte once it is computed:
    the store comes from inside the computation, at a node chosen by count. A ctypes callback, so
    it runs in the interpreter on the decoding thread: this decodes on the test's own thread."""

    def __init__(self, byte):
        self.byte, self.asks, self.stop_at, self.stored_at = byte, 0, None, None
        self.fn = llama_cancel.abi.eval_callback_t(self._callback)  # kept alive as long as the hook
        self.address = llama_cancel.native_address(self.fn)

    def arm(self, stop_at=None):
        self.asks, self.stop_at, self.stored_at = 0, stop_at, None

    def _callback(self, tensor, ask, data):
        if ask:
            self.asks += 1
            return self.asks == self.stop_at
        if self.stop_at is not None and self.asks >= self.stop_at and self.stored_at is None:
            self.byte.set()
            self.stored_at = self.asks
        return True


class DecodeStoppedInsideThePrefill(host.ModelTest):
    """512 tokens in ubatches of 128, the byte stored from inside the third: CANCELLED with the two
    finished ubatches committed (a stop that threw finished work away, or one before any work, fails
    here), and the rest decoded from there gives the last token's logits of a clean decode on a
    fresh context, byte for byte."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.counter = AskCounter(cls.byte)
        cls.hook = cls.lib.hook(cls.byte, chain=cls.counter.address)
        cls.ctx = cls.context(hook=cls.hook)
        cls.mem = cls.lib.llama.llama_get_memory(cls.ctx)

    @classmethod
    def tearDownClass(cls):
        cls.lib.llama.llama_free(cls.ctx)
        cls.lib.llama_cancel_hook_free(cls.hook)
        super().tearDownClass()

    @classmethod
    def context(cls, hook=None):
        ctx = cls.lib.context(cls.model, hook=hook, n_ctx=N_PREFILL, n_batch=N_PREFILL, n_ubatch=N_PREFILL_UBATCH,
                              n_threads=2, n_threads_batch=2, op_offload=False, offload_kqv=False)
        assert ctx, "context created"
        return ctx

    def decode(self, ctx, toks, hook=None):
        batch, keep = self.lib.tokens_batch(toks)
        return self.lib.decode(ctx, batch, self.byte, hook=hook, n_seq=1)

    def last_logits_bytes(self, ctx, result, i):
        """The raw bytes of batch index i's logits (llama_cancel_get_logits_ith), for a bitwise compare."""
        ptr = self.lib._c.llama_cancel_get_logits_ith(ctx, C.byref(result), i)
        self.assertTrue(ptr, f"batch index {i} has logits")
        return C.string_at(ptr, 4 * self.lib.n_vocab(ctx))

    def test_stop_in_the_third_ubatch_keeps_two_and_resumes_bit_identical(self):
        toks = host.tokens(N_PREFILL)
        n_ubatches = N_PREFILL // N_PREFILL_UBATCH

        # A clean run through the hooked context: how many asks a ubatch takes.
        self.lib.llama.llama_memory_clear(self.mem, True)
        self.counter.arm()
        status, result, _ = self.decode(self.ctx, toks, self.hook)
        self.assertEqual(status, llama_cancel.OK, result.message)
        self.assertEqual(result.n_committed, N_PREFILL)
        self.assertEqual(self.counter.asks % n_ubatches, 0, f"{self.counter.asks} asks in {n_ubatches} equal graphs")
        per_ubatch = self.counter.asks // n_ubatches
        self.assertGreater(per_ubatch, 4)

        # The byte clear on entry, stored at the middle of the third ubatch's graph.
        self.lib.llama.llama_memory_clear(self.mem, True)
        self.byte.clear()
        self.counter.arm(stop_at=2 * per_ubatch + per_ubatch // 2)
        status, result, seqs = self.decode(self.ctx, toks, self.hook)
        self.assertEqual(self.counter.stored_at, 2 * per_ubatch + per_ubatch // 2, "stored inside the third ubatch")
        self.assertEqual(status, llama_cancel.CANCELLED, result.message)
        self.assertEqual(result.status, llama_cancel.CANCELLED)
        n = result.n_committed
        self.assertGreater(n, 0, "the finished ubatches are kept")
        self.assertEqual(n % N_PREFILL_UBATCH, 0, "only whole ubatches are committed")
        self.assertLess(n, N_PREFILL)
        self.assertEqual(n, 2 * N_PREFILL_UBATCH, "exactly the two ubatches finished before the store")
        self.assertEqual([(q.n_committed, q.output, q.cancelled) for q in seqs], [(n, -1, 0)])
        self.assertEqual(self.lib.llama.llama_memory_seq_pos_max(self.mem, 0), n - 1)
        self.assertLess(self.counter.asks, 3 * per_ubatch, "the third graph was abandoned")

        # Resume from n_committed with the byte cleared.
        self.byte.clear()
        self.counter.arm()
        status, result, _ = self.decode(self.ctx, toks[n:], self.hook)
        self.assertEqual(status, llama_cancel.OK, result.message)
        self.assertEqual(result.n_committed, N_PREFILL - n)
        self.assertEqual(self.lib.llama.llama_memory_seq_pos_max(self.mem, 0), N_PREFILL - 1)
        resumed = self.last_logits_bytes(self.ctx, result, N_PREFILL - n - 1)

        # A clean, uninterrupted decode on a fresh context without a hook.
        fresh = self.context()
        try:
            status, result, _ = self.decode(fresh, toks)
            self.assertEqual(status, llama_cancel.OK, result.message)
            want = self.last_logits_bytes(fresh, result, N_PREFILL - 1)
        finally:
            self.lib.llama.llama_free(fresh)
        self.assertEqual(len(resumed), len(want))
        self.assertTrue(any(want), "real logits")
        self.assertTrue(resumed == want, "the resumed decode's last logits are bit-identical to a clean decode's")


if __name__ == "__main__":
    unittest.main()
