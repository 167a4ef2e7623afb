"""What the module's tests share: the library, the test probe, models and contexts, and the
cross-thread cancel itself. Paths come from the environment CTest sets:
LLAMA_CANCEL_LIBRARY, LLAMA_CANCEL_PROBE (tests/ffi_probe.c built), LLAMA_CANCEL_BENCH_MODEL,
LLAMA_CANCEL_TINY_MODEL, LLAMA_CANCEL_SMALL_MODEL, LLAMA_CANCEL_VISION_MMPROJ, LLAMA_CANCEL_HEADER."""
import ctypes as C
import os
import statistics
import threading
import time
import unittest

import llama_cancel

WAIT_MS = 20000  # every wait on the other thread is bounded; past it the test fails and says why


def env(name):
    """A path CTest sets; without it the test is skipped, which conftest.py fails in CI."""
    value = os.environ.get(name)
    if not value:
        raise unittest.SkipTest(f"{name} is not set (run through CTest)")
    return value


_lib = None


def lib():
    """The library under test, loaded once, with its CPU backend only."""
    global _lib
    if _lib is None:
        _lib = llama_cancel.load(env("LLAMA_CANCEL_LIBRARY"))
        _lib.load_backends()
    return _lib


class ModelTest(unittest.TestCase):
    """A test class on one model loaded once for it (MODEL: the environment variable of its path),
    with the library (`lib`) and a host byte (`byte`). A subclass makes its contexts and hooks after
    this setUpClass and frees them before this tearDownClass."""
    MODEL = "LLAMA_CANCEL_TINY_MODEL"

    @classmethod
    def setUpClass(cls):
        cls.lib = lib()
        cls.model, res = cls.lib.model_load(env(cls.MODEL))
        assert cls.model, res.message
        cls.byte = llama_cancel.Byte()

    @classmethod
    def tearDownClass(cls):
        cls.lib.llama.llama_model_free(cls.model)


class Probe:
    """tests/ffi_probe.c's host probe: a native callback that holds the graph (or the token loop) at
    call `hold_at` until the host's byte is set, so that a store from this thread lands inside the
    decode every time. Its functions, not its layout, are what Python sees."""

    def __init__(self, byte):
        self.so = C.CDLL(env("LLAMA_CANCEL_PROBE"))
        P, I32, I64 = C.c_void_p, C.c_int32, C.c_int64
        for name, res, args in (("host_probe_new", P, [P]), ("host_probe_free", None, [P]),
                                ("host_probe_arm", None, [P, I32]), ("host_probe_wait_started", I32, [P, I32]),
                                ("host_probe_calls", I32, [P]), ("host_probe_timed_out", I32, [P]),
                                ("host_probe_decode_tid", I64, [P]), ("host_probe_off_thread", I64, [P]),
                                ("host_probe_gettid", I64, [])):
            fn = getattr(self.so, name)
            fn.restype, fn.argtypes = res, args
        self.ptr = self.so.host_probe_new(byte.address)
        self.abort_callback = llama_cancel.native_address(self.so.host_probe_abort_callback)
        self.eval_callback = llama_cancel.native_address(self.so.host_probe_eval_callback)
        self.on_token = llama_cancel.native_address(self.so.host_probe_on_token)

    def arm(self, hold_at):
        self.so.host_probe_arm(self.ptr, hold_at)

    def calls(self):
        return self.so.host_probe_calls(self.ptr)

    def close(self):
        self.so.host_probe_free(self.ptr)


class CrossThreadCancel:
    """Runs `call` on a worker thread, waits until the probe holds it inside the computation,
    stores the byte from this (the main) thread and waits for the worker. Records what happened."""

    def __init__(self, probe, byte):
        self.probe, self.byte = probe, byte

    def run(self, testcase, call, hold_at):
        out = {}

        def worker():
            out["tid"] = threading.get_native_id()
            try:
                out["value"] = call()
            except BaseException as e:  # re-raised on the test's thread below
                out["error"] = e
            out["returned"] = time.perf_counter()

        self.byte.clear()
        self.probe.arm(hold_at)
        # A daemon: should the call never return, the test fails after WAIT_MS and the process
        # still exits instead of waiting for the worker.
        t = threading.Thread(target=worker, daemon=True)
        t.start()
        started = self.probe.so.host_probe_wait_started(self.probe.ptr, WAIT_MS)
        stored = time.perf_counter()
        self.byte.set()  # the cancel: one byte store, from the main thread
        t.join(WAIT_MS / 1000)
        testcase.assertTrue(started, f"the worker never reached call {hold_at} (of {self.probe.calls()})")
        testcase.assertFalse(t.is_alive(), "the worker did not return after the store")
        testcase.assertFalse(self.probe.so.host_probe_timed_out(self.probe.ptr), "the probe never saw the store")
        if "error" in out:
            raise out["error"]
        so, ptr = self.probe.so, self.probe.ptr
        testcase.assertEqual(so.host_probe_decode_tid(ptr), out["tid"], "callbacks ran on the worker thread")
        testcase.assertNotEqual(out["tid"], so.host_probe_gettid(), "the store came from another thread")
        testcase.assertEqual(so.host_probe_off_thread(ptr), 0, "no callback ran off the worker thread")
        self.byte.clear()
        return out["value"], (out["returned"] - stored) * 1e3


def timed(fn, runs=3):
    """Median wall time of `fn()` in ms, and its last value."""
    times, value = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        value = fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), value


def tokens(n, vocab=200, seed=7919):
    return [3 + (i * seed) % vocab for i in range(n)]
