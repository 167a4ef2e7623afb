"""Text-to-speech (llama_cancel_tts_*): a generation as an object.

    tts, r = lc.tts(lctx, mctx, "Hello world.", seed=42)   # None and r.message when refused
    worker = tts.start(byte, hook=dec, mtmd_hook=gen)       # generate on a threading.Thread
    byte.set()                                              # any thread: CANCELLED at the last committed step
    status, r = worker.wait(20)                             # r.step: where it stopped
    byte.clear(); status, r = tts.generate(byte)            # resumes: the uninterrupted run's PCM (CPU)
    samples = tts.pcm()                                     # array('f'), mono at r.sample_rate

One call at a time: generate, flush, pcm and state refuse (RuntimeError) while a call of the same
Tts runs on another thread. state() is the Tts's copy of its last call's result (the header has no
getter since 2.0). The contexts it was made on stay the caller's: close the Tts before
freeing them (and, the model's, before the hooks)."""
import array
import ctypes as C
import threading

from . import abi


class Tts:
    """One generation (llama_cancel_tts *): its prompt, frames, streaming state and PCM. Made by
    Library.tts(); close() (or a `with` block) frees it."""

    def __init__(self, lib, ptr, keep=(), result=None):
        self._lib, self.ptr = lib, ptr
        self._keep = list(keep)  # the voice bitmap and the sampler the library points to until free
        # The last call's result (init's until one ran), a copy: state() gives copies of it.
        self._last = abi.llama_cancel_tts_result()
        if result is not None:
            self._last = abi.llama_cancel_tts_result.from_buffer_copy(result)
        self._lock = threading.Lock()
        self._busy = False

    # --- lifetime ---

    def close(self):
        """llama_cancel_tts_free; the backbone's sequence keeps what it holds. Twice is harmless."""
        with self._lock:
            if self._busy:
                raise RuntimeError("llama_cancel_tts: a call of this generation is still running")
            ptr, self.ptr = self.ptr, None
        if ptr:
            self._lib._c.llama_cancel_tts_free(ptr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _enter(self):
        with self._lock:
            if not self.ptr:
                raise ValueError("llama_cancel_tts: this generation was closed")
            if self._busy:
                raise RuntimeError("llama_cancel_tts: a call of this generation is already running")
            self._busy = True

    def _leave(self):
        with self._lock:
            self._busy = False

    # --- the calls ---

    def _call(self, fn, byte, hook, mtmd_hook, n_frames, max_stop_ms, on_frame, on_frame_data):
        callback, raised = None, []
        if callable(on_frame):
            user = on_frame

            def trampoline(n_frames_, n_samples, _data):
                try:
                    return bool(user(n_frames_, n_samples))
                except BaseException as e:  # stops the generation, re-raised on return
                    raised.append(e)
                    return False
            callback = abi.tts_frame_callback_t(trampoline)
            on_frame = C.cast(callback, C.c_void_p).value
        rp = self._lib.tts_run_params(byte, hook, mtmd_hook, n_frames, max_stop_ms, on_frame, on_frame_data)
        result = abi.llama_cancel_tts_result()
        self._enter()
        try:
            status = fn(self.ptr, C.byref(rp), C.byref(result))  # ctypes releases the GIL meanwhile
            self._last = abi.llama_cancel_tts_result.from_buffer_copy(result)  # before an on_frame error is raised
        finally:
            self._leave()
        del callback  # alive until here: the library called it during the call only
        if raised:
            raise raised[0]
        return status, result

    def generate(self, byte=None, hook=None, mtmd_hook=None, n_frames=0, max_stop_ms=0.0, on_frame=None,
                 on_frame_data=None):
        """llama_cancel_tts_generate: (status, llama_cancel_tts_result). Runs the generation on from
        where it is, n_frames frames more (0: to its end). OK: done (result.finished 1 at the end,
        every frame then in the PCM); CANCELLED: the byte stopped it at a committed step
        (result.step says which), call again to resume; ERROR: result.message. hook / mtmd_hook:
        the hooks bound to lctx and mctx (None: found). on_frame: a Python callable
        f(n_frames, n_samples) -> bool, called on the generating thread after each committed frame
        (between the steps, never inside a graph; false stops: CANCELLED, step BETWEEN; an
        exception stops too and is raised here), or a native callback's address with on_frame_data."""
        return self._call(self._lib._c.llama_cancel_tts_generate, byte, hook, mtmd_hook, n_frames, max_stop_ms,
                          on_frame, on_frame_data)

    def flush(self, byte=None, hook=None, mtmd_hook=None):
        """llama_cancel_tts_flush: GEN_WAV of the frames not yet in the PCM, now, for a host that ends
        a stopped generation and wants all its audio; the generation is then finished. (status, result)."""
        return self._call(self._lib._c.llama_cancel_tts_flush, byte, hook, mtmd_hook, 0, 0.0, None, None)

    def start(self, byte=None, **run):
        """generate(byte, **run) on a new threading.Thread (a daemon), started: a TtsWorker, whose
        wait(timeout) gives (status, result). The thread owns lctx and mctx until it ends."""
        worker = TtsWorker(self, byte, run)
        worker.start()
        return worker

    # --- what it holds (between calls) ---

    def _pcm_pointer(self):
        n = C.c_int64(0)
        self._enter()
        try:
            ptr = self._lib._c.llama_cancel_tts_get_pcm(self.ptr, C.byref(n))
            data = C.string_at(ptr, n.value * 4) if ptr and n.value > 0 else b""
        finally:
            self._leave()
        return data

    def pcm_bytes(self):
        """A copy of the PCM so far: mono float32 samples in the machine's byte order, as bytes."""
        return self._pcm_pointer()

    def pcm(self):
        """A copy of the PCM so far: array('f') of mono samples at state().sample_rate."""
        out = array.array("f")
        out.frombytes(self._pcm_pointer())
        return out

    def state(self):
        """Where the generation stands: a copy of the llama_cancel_tts_result of the last generate or
        flush (status, stop_reason and step of that call, frames, samples, finished; init's result
        before any), which this object keeps."""
        self._enter()
        try:
            return abi.llama_cancel_tts_result.from_buffer_copy(self._last)
        finally:
            self._leave()


class TtsWorker(threading.Thread):
    """Tts.generate on its own thread (Tts.start()). The main thread stores the byte meanwhile."""

    def __init__(self, tts, byte, run):
        super().__init__(name="llama-cancel-tts", daemon=True)  # a stuck call does not hold the process
        self.tts, self.byte, self.run_params = tts, byte, run
        self.value, self.error = None, None

    def run(self):
        try:
            self.value = self.tts.generate(self.byte, **self.run_params)
        except BaseException as e:  # raised again by wait()
            self.error = e

    def wait(self, timeout=None):
        """Joins the thread; its (status, result). TimeoutError when it is still running after
        `timeout` seconds; the generate's exception, raised here."""
        self.join(timeout)
        if self.is_alive():
            raise TimeoutError(f"llama_cancel_tts_generate still running after {timeout} s")
        if self.error is not None:
            raise self.error
        return self.value
