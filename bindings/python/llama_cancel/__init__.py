"""llama-cancel for Python: stop an in-flight llama.cpp computation from any thread by storing one
byte. Pure ctypes, no compiled extension.

    import llama_cancel
    lc = llama_cancel.load()               # finds libllama-cancel, checks its version and layouts
    byte = llama_cancel.Byte()             # the byte; the library only reads it
    worker: lc.decode(ctx, batch, byte)    # ctypes releases the GIL for the call
    any thread: byte.set()                 # the decode in flight returns CANCELLED

Every function of llama-cancel.h is available by its C name on the Library (lc.llama_cancel_decode,
...), with argument and result types declared; the llama.h and mtmd.h functions a host needs around
it on lc.llama and lc.mtmd. The helpers below wrap the common calls; text-to-speech is lc.tts()
(tts.py: a Tts object whose generate() runs here or, with start(), on a worker thread).
"""
import ctypes as C
import ctypes.util
import os
import sys

from . import abi, libraries, llama, mtmd
from .abi import (CANCELLED, ERROR, MTMD_BATCH_ENCODE, OK,  # noqa: F401
                  REACH_CALLS, REACH_CPU, REACH_GRAPH, REACH_NAMES,
                  STOP_CANCELLED, STOP_EOG, STOP_ERROR, STOP_LENGTH,
                  TTS_STEP_BACKBONE, TTS_STEP_BETWEEN, TTS_STEP_GEN_CODE, TTS_STEP_GEN_WAV, TTS_STEP_NONE,
                  TTS_STEP_PROMPT, TTS_STEP_VOICE,
                  llama_cancel_decode_params, llama_cancel_decode_result, llama_cancel_embed_params,
                  llama_cancel_embed_result, llama_cancel_gen_audio_params,
                  llama_cancel_gen_audio_result, llama_cancel_generate_params,
                  llama_cancel_generate_result, llama_cancel_hook_params, llama_cancel_hook_stats,
                  llama_cancel_snapshot_stats,
                  llama_cancel_load_result, llama_cancel_mtmd_params, llama_cancel_mtmd_result,
                  llama_cancel_seq_result, llama_cancel_tts_params, llama_cancel_tts_result,
                  llama_cancel_tts_run_params)
from .tts import Tts, TtsWorker  # noqa: F401
from .libraries import ENV, Functions, candidate_paths, file_of, library_files  # noqa: F401

__version__ = "%d.%d.%d" % (abi.VERSION_MAJOR, abi.VERSION_MINOR, abi.VERSION_PATCH)


class AbiMismatch(RuntimeError):
    """The loaded library's version or struct layouts differ from those this module declares."""


class Byte:
    """The caller-owned byte. Any thread (or a signal handler) calls set(); the library only loads
    it. Keep the Byte alive while any call or installed callback may read it."""

    def __init__(self):
        self._byte = C.c_int8(0)
        self.ptr = C.pointer(self._byte)  # what the params' `byte` fields take

    def set(self):
        self._byte.value = 1

    def clear(self):
        self._byte.value = 0

    @property
    def is_set(self):
        return self._byte.value != 0

    @property
    def address(self):
        return C.addressof(self._byte)


def native_address(fn):
    """Address of a native function (a ctypes function of a loaded library), for the fields that
    take one (abort_callback, chain, on_token). Python callables are not accepted on purpose: ggml
    calls these on the decoding thread, in the middle of a graph."""
    return C.cast(fn, C.c_void_p).value


def _declare(lib, table):
    for name, (restype, argtypes) in table.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes


def _candidate_paths():
    """Where load() looks when given no path, in order."""
    paths = []
    if os.environ.get("LLAMA_CANCEL_LIBRARY"):
        paths.append(os.environ["LLAMA_CANCEL_LIBRARY"])
    try:  # written by `cmake --install`: the library relative to this installed package
        from . import _location
        paths.append(os.path.normpath(os.path.join(os.path.dirname(__file__), _location.LIBRARY)))
    except ImportError:
        pass
    found = ctypes.util.find_library("llama-cancel")
    if found:
        paths.append(found)
    # libllama-cancel.so.2 and .so, libllama-cancel.2.dylib and .dylib, llama-cancel.dll and libllama-cancel.dll
    paths += [name for name in library_files("llama-cancel")[0] if name not in paths]
    return paths


def load(path=None):
    """Opens libllama-cancel (path, else $LLAMA_CANCEL_LIBRARY, else the installed one, else the
    dynamic loader's search by the platform's names) and checks it; raises OSError when none loads,
    AbiMismatch when its version or layouts differ. A host's own library that links llama-cancel
    statically works too. llama.cpp's libraries are then opened by their own names (libraries.py:
    $LLAMA_CANCEL_LLAMA_LIBRARY, $LLAMA_CANCEL_GGML_LIBRARY, $LLAMA_CANCEL_MTMD_LIBRARY override)."""
    errors = []
    for candidate in [path] if path else _candidate_paths():
        try:
            return Library(candidate)
        except OSError as e:
            errors.append(f"{candidate}: {e}")
    raise OSError("cannot load libllama-cancel: " + "; ".join(errors))


class _Rows(list):
    """embed()'s rows, with the native array they were read from (`out`) for a resumed call."""

    def __init__(self, rows, out):
        super().__init__(rows)
        self.out = out


class Library:
    """A loaded libllama-cancel: the C functions by name, llama.cpp's beside it, and helpers."""

    def __init__(self, path):
        self.path = path
        windows = sys.platform == "win32"
        self._dll_dirs = []  # os.add_dll_directory's cookies: the folders stay searched while this lives
        folder = os.path.dirname(os.path.abspath(path)) if os.path.dirname(path) else None
        if windows and folder:
            self._dll_dirs.append(os.add_dll_directory(folder))  # the DLLs it imports: beside it first
        self._c = C.CDLL(path, mode=C.RTLD_GLOBAL)
        _declare(self._c, abi.prototypes(llama))
        self.check_abi()
        # The folder of the file the loader opened (a bare name too), where llama.cpp's libraries are
        # looked for on Windows first (libraries.py).
        opened = file_of(libraries.address_in(self._c, "llama_cancel_version"))
        self.folder = os.path.dirname(opened) if opened else folder
        if windows and self.folder and self.folder != folder:
            self._dll_dirs.append(os.add_dll_directory(self.folder))
        # llama.h, ggml and mtmd.h functions, each from the library that defines it (libllama,
        # libggml / libggml-base, libmtmd, opened by their own names), else from llama-cancel's
        # handle (a host library with everything linked in). self.files: what each kind opened.
        self.files = {}
        self.llama = self._functions("llama", llama.prototypes())
        self.ggml = self._functions("ggml", llama.ggml_prototypes())
        self.has_mtmd = bool(self._c.llama_cancel_has_mtmd())
        self.mtmd = self._functions("mtmd", mtmd.prototypes()) if self.has_mtmd else None

    def _functions(self, kind, table):
        handles = libraries.open_kind(kind, list(table), self._c, self.folder)
        self.files[kind] = [h._name for h in handles]
        return Functions(handles + [self._c], table)

    def __getattr__(self, name):
        if name.startswith("llama_cancel_"):
            return getattr(self._c, name)
        raise AttributeError(name)

    # --- version and layouts ---

    def version(self):
        """(major, minor, patch) of the loaded library."""
        v = self._c.llama_cancel_version()
        return v // 10000, v // 100 % 100, v % 100

    def abi_problems(self):
        """Differences between the loaded library and this module's declarations; empty when none.
        Every struct this module copies is compared, size and each field's offset: llama-cancel.h's,
        llama.h's, and mtmd.h's where the library is built with libmtmd."""
        problems = []
        major, minor, patch = self.version()
        if major != abi.VERSION_MAJOR or minor < abi.VERSION_MINOR:
            problems.append(f"library version {major}.{minor}.{patch}, module written for {__version__} "
                            f"(needs {abi.VERSION_MAJOR}.x with x >= {abi.VERSION_MINOR})")
        structs = abi.STRUCTS + llama.STRUCTS
        if self._c.llama_cancel_has_mtmd():
            structs += mtmd.STRUCTS
        for s in structs:
            problems += self._struct_problems(s)
        return problems

    def _struct_problems(self, s):
        """Size and every field's offset of `s` (a ctypes Structure named as its C struct) against the
        library's struct of that name."""
        name = s.__name__.encode()
        size = self._c.llama_cancel_struct_size(name)
        out = []
        if size != C.sizeof(s):
            out.append(f"{s.__name__}: {size} bytes in the library, {C.sizeof(s)} here")
        for field, _ in s._fields_:
            offset = self._c.llama_cancel_field_offset(name, field.encode())
            if offset != getattr(s, field).offset:
                out.append(f"{s.__name__}.{field}: offset {offset} in the library, {getattr(s, field).offset} here")
        # llama-cancel.h's structs have no padding on 64-bit targets: a field this copy lacks at the
        # end, which the copy's tail padding would hide from the size, shows as a gap before the end.
        # (llama.h's and mtmd.h's have padding: their copies are generated whole from the headers.)
        end = max(getattr(s, f).offset + getattr(s, f).size for f, _ in s._fields_)
        if s.__name__.startswith("llama_cancel_") and C.sizeof(C.c_void_p) == 8 and end != size:
            out.append(f"{s.__name__}: the fields declared here end at byte {end}, the library's struct at {size}")
        return out

    def check_abi(self):
        problems = self.abi_problems()
        if problems:
            raise AbiMismatch(f"{self.path}: " + "; ".join(problems))

    # --- helpers ---

    def load_backends(self, keep=()):
        """Loads ggml's dynamically built backends (as Debian ships them) and unloads BLAS, Vulkan
        and RPC unless named in `keep`: the CPU backend, where the abort callback runs, stays."""
        self.ggml.ggml_backend_load_all()
        for name in ("BLAS", "Vulkan", "RPC"):
            reg = self.ggml.ggml_backend_reg_by_name(name.encode())
            if reg and name not in keep:
                self.ggml.ggml_backend_unload(reg)

    def model_load(self, path, byte=None, params=None):
        """llama_cancel_model_load: (model pointer or None, llama_cancel_load_result)."""
        result = llama_cancel_load_result()
        params = params if params is not None else self.llama.llama_model_default_params()
        model = self._c.llama_cancel_model_load(path.encode() if isinstance(path, str) else path, params,
                                                byte.ptr if byte else None, C.byref(result))
        return model, result

    def context(self, model, hook=None, **fields):
        """llama_init_from_model with llama_context_default_params() and `fields` set on it (n_ctx=...,
        n_threads=...); `hook` (from hook()) bound as its eval callback. None on failure."""
        cp = self.llama.llama_context_default_params()
        for k, v in fields.items():
            setattr(cp, k, v)
        if hook and not self._c.llama_cancel_hook_bind(hook, C.byref(cp)):
            raise ValueError("llama_cancel_hook_bind refused: cb_eval is already set (chain it through hook())")
        return self.llama.llama_init_from_model(model, cp)

    def hook(self, byte=None, interval_ms=0.0, chain=None, chain_data=None):
        """llama_cancel_hook_init; `chain` is a native eval callback's address (native_address())."""
        p = self._c.llama_cancel_hook_default_params()
        p.byte = byte.ptr if byte else None
        p.interval_ms = interval_ms
        p.chain, p.chain_data = chain, chain_data
        return self._c.llama_cancel_hook_init(C.byref(p))

    def decode(self, ctx, batch, byte=None, hook=None, abort_callback=None, abort_callback_data=None,
               n_seq=0, max_stop_ms=0.0, seq_bytes=None, seqs=None):
        """llama_cancel_decode: (status, llama_cancel_decode_result, list of llama_cancel_seq_result).
        result.reach (REACH_GRAPH, REACH_CPU, REACH_CALLS) says where the byte was read: REACH_CPU on a
        context with layers off the CPU means a stop there waited for whole graphs (bind a hook:
        context(model, hook=hook(byte))). seq_bytes: a Byte (or None) per sequence; setting one drops
        that sequence alone. The per-sequence results have len(seq_bytes) entries, else n_seq (0:
        none). `seqs`: an array of llama_cancel_seq_result of that length (or any, without seq_bytes
        and n_seq) to write into instead, for a thread that polls seqs[s].cancelled while the call runs."""
        p = self._c.llama_cancel_decode_default_params()
        p.byte = byte.ptr if byte else None
        p.hook = hook
        p.abort_callback, p.abort_callback_data = abort_callback, abort_callback_data
        p.max_stop_ms = max_stop_ms
        if seqs is not None and seq_bytes is None and n_seq == 0:
            n_seq = len(seqs)
        if seq_bytes is not None:
            n_seq = len(seq_bytes)
            flags = (C.POINTER(C.c_int8) * n_seq)(*[f.ptr if f else None for f in seq_bytes])
            p.seq_bytes = C.cast(flags, C.POINTER(C.POINTER(C.c_int8)))
        p.n_seq = n_seq
        if seqs is None and n_seq > 0:
            # Impossible values, so that a field the library failed to write cannot pass for an answer.
            seqs = (llama_cancel_seq_result * n_seq)(*[(-2, -2, -2)] * n_seq)
        elif seqs is not None and len(seqs) != n_seq:
            raise ValueError(f"seqs has {len(seqs)} entries, the call {n_seq} sequences")
        result = llama_cancel_decode_result()
        status = self._c.llama_cancel_decode(ctx, batch, C.byref(p), C.byref(result), seqs)
        return status, result, list(seqs) if seqs is not None else []

    def encode(self, ctx, batch, byte=None, hook=None):
        """llama_cancel_encode (an encoder-decoder's encode, or an encoder-only model's batch):
        (status, llama_cancel_decode_result). CANCELLED: nothing of the encode is in ctx."""
        p = self._c.llama_cancel_decode_default_params()
        p.byte = byte.ptr if byte else None
        p.hook = hook
        result = llama_cancel_decode_result()
        return self._c.llama_cancel_encode(ctx, batch, C.byref(p), C.byref(result)), result

    def embed(self, ctx, sequences, byte=None, hook=None, first=0, out=None, abort_callback=None,
              abort_callback_data=None):
        """llama_cancel_embed over sequences[first:] (lists of tokens; sequence i has id i, below the
        context's n_seq_max): (status, llama_cancel_embed_result, rows), rows[i] the pooled vector of
        sequence i (a rank score list for a reranker) or None while it is not done. A stop keeps the
        finished sequences, sequences[:first + result.n_seq_done]; resume with
        first=first + result.n_seq_done and the same `out` (rows.out, a ctypes float array).
        abort_callback: the host's own (native), consulted too, as in decode()."""
        n_out = self._c.llama_cancel_embed_n_out(ctx)
        if n_out <= 0:
            raise ValueError("the context pools no embeddings (embeddings=True and a pooling type)")
        if out is None:
            out = (C.c_float * (len(sequences) * n_out))(*([float("nan")] * (len(sequences) * n_out)))
        todo = sequences[first:]
        n = sum(len(t) for t in todo)
        b = self.llama.llama_batch_init(max(n, 1), 0, 1)
        try:
            i = 0
            for s, tokens in enumerate(todo, start=first):
                for k, t in enumerate(tokens):
                    b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = t, k, 1, 1
                    b.seq_id[i][0] = s
                    i += 1
            b.n_tokens = n
            p = self._c.llama_cancel_embed_default_params()
            p.byte = byte.ptr if byte else None
            p.hook = hook
            p.abort_callback, p.abort_callback_data = abort_callback, abort_callback_data
            result = llama_cancel_embed_result()
            status = self._c.llama_cancel_embed(ctx, b, C.byref(p), out, len(out), C.byref(result))
        finally:
            self.llama.llama_batch_free(b)
        done = first + (len(todo) if status == OK else result.n_seq_done)
        rows = [list(out[s * n_out:(s + 1) * n_out]) if s < done else None for s in range(len(sequences))]
        return status, result, _Rows(rows, out)

    def decode_seqs(self, ctx, batch, seq_bytes, **kw):
        """decode() with a byte per sequence: seq_bytes[s] is sequence s's Byte (or None). The same
        (status, result, seqs); seqs[s].n_committed, .output (llama_get_logits_ith index of its last
        output, -1: none or dropped) and .cancelled (1 once dropped)."""
        return self.decode(ctx, batch, seq_bytes=seq_bytes, **kw)

    def _generate_params(self, n_predict, byte, hook, seq_id, sampler, on_token, on_token_data, max_stop_ms, n_batch):
        p = self._c.llama_cancel_generate_default_params()
        p.byte = byte.ptr if byte else None
        p.n_predict, p.seq_id, p.sampler, p.hook, p.max_stop_ms = n_predict, seq_id, sampler, hook, max_stop_ms
        p.on_token, p.on_token_data, p.n_batch = on_token, on_token_data, n_batch
        return p

    def generate(self, ctx, prompt, n_predict, byte=None, hook=None, seq_id=0, sampler=None,
                 on_token=None, on_token_data=None, max_stop_ms=0.0, n_batch=0):
        """llama_cancel_generate: (status, llama_cancel_generate_result, generated tokens). n_batch:
        prompt tokens per decode (0: the context's)."""
        p = self._generate_params(n_predict, byte, hook, seq_id, sampler, on_token, on_token_data, max_stop_ms, n_batch)
        tokens = (C.c_int32 * max(len(prompt), 1))(*prompt)
        out = (C.c_int32 * max(n_predict, 1))()
        result = llama_cancel_generate_result()
        status = self._c.llama_cancel_generate(ctx, tokens, len(prompt), C.byref(p), out, n_predict, C.byref(result))
        return status, result, list(out[:result.n_generated])

    def tokens_batch(self, tokens):
        """A llama_batch_get_one batch over `tokens` (next positions of sequence 0) and the array it
        points into, which must outlive the decode: (batch, array)."""
        arr = (C.c_int32 * len(tokens))(*tokens)
        return self.llama.llama_batch_get_one(arr, len(tokens)), arr

    def n_vocab(self, ctx):
        return self.llama.llama_vocab_n_tokens(self.llama.llama_model_get_vocab(self.llama.llama_get_model(ctx)))

    def last_logits(self, ctx, n=None):
        """A copy of the logits of the last output of the last decode (None when there is none)."""
        ptr = self.llama.llama_get_logits_ith(ctx, -1)
        return list(ptr[:n or self.n_vocab(ctx)]) if ptr else None

    def logits_ith(self, ctx, result, i, n=None):
        """A copy of the logits of batch index i after decode() returned OK into `result`
        (llama_cancel_get_logits_ith: right on every path); None when that output does not exist."""
        ptr = self._c.llama_cancel_get_logits_ith(ctx, C.byref(result), i)
        return list(ptr[:n or self.n_vocab(ctx)]) if ptr else None

    # --- multimodal (llama_cancel_has_mtmd()) ---

    def mtmd_init(self, mmproj_path, model, mtmd_hook=None, n_threads=0, use_gpu=False, byte=None):
        """llama_cancel_mtmd_init_from_file: (mtmd context or None, llama_cancel_load_result).
        mtmd_hook: the hook that becomes the context's cb_eval (its encodes', or for text-to-speech its
        GEN_CODE and GEN_WAV graphs'); pass the same as mtmd_hook= to the calls on that context."""
        result = llama_cancel_load_result()
        mctx = self._c.llama_cancel_mtmd_init_from_file(mmproj_path.encode(), model, mtmd_hook, n_threads,
                                                        use_gpu, byte.ptr if byte else None, C.byref(result))
        return mctx, result

    def mtmd_tokenize(self, mctx, text, bitmaps):
        """mtmd_tokenize of `text` (one mtmd_default_marker() per bitmap): the chunk list, or raises."""
        chunks = self.mtmd.mtmd_input_chunks_init()
        raw = text.encode()
        t = mtmd.mtmd_input_text(raw, len(raw), True, True)
        arr = (C.c_void_p * max(len(bitmaps), 1))(*bitmaps)
        ret = self.mtmd.mtmd_tokenize(mctx, chunks, C.byref(t), arr, len(bitmaps))
        if ret != 0:
            self.mtmd.mtmd_input_chunks_free(chunks)
            raise ValueError(f"mtmd_tokenize returned {ret}")
        return chunks

    def _mtmd_params(self, byte, hook, mtmd_hook, seq_id, n_batch, max_stop_ms, seq_bytes, options, logits_last):
        p = self._c.llama_cancel_mtmd_default_params()
        p.byte = byte.ptr if byte else None
        p.hook, p.mtmd_hook, p.seq_id, p.n_batch, p.max_stop_ms = hook, mtmd_hook, seq_id, n_batch, max_stop_ms
        p.options, p.logits_last = options, 1 if logits_last else 0
        if seq_bytes is not None:
            flags = (C.POINTER(C.c_int8) * len(seq_bytes))(*[f.ptr if f else None for f in seq_bytes])
            p.seq_bytes, p.n_seq = C.cast(flags, C.POINTER(C.POINTER(C.c_int8))), len(seq_bytes)
            p._keep = flags  # alive as long as the params
        return p

    def mtmd_eval_chunks(self, mctx, lctx, chunks, first_chunk=0, n_past=0, byte=None, hook=None, mtmd_hook=None,
                         seq_id=0, n_batch=0, max_stop_ms=0.0, seq_bytes=None, options=0, logits_last=True):
        """llama_cancel_mtmd_eval_chunks: (status, llama_cancel_mtmd_result). hook / mtmd_hook: the
        hooks bound to lctx and mctx (None: found). CANCELLED or ERROR: resume with
        first_chunk=result.n_chunks_done, n_past=result.n_past (and the same options). seq_bytes: a
        Byte (or None) per sequence, as in decode(); seq_id's stops the evaluation. options: 0 or
        MTMD_BATCH_ENCODE. logits_last: the last chunk's last token gets logits, from which
        generate(lctx, [], n_predict) goes on (generate_mtmd() does both)."""
        p = self._mtmd_params(byte, hook, mtmd_hook, seq_id, n_batch, max_stop_ms, seq_bytes, options, logits_last)
        result = llama_cancel_mtmd_result()
        status = self._c.llama_cancel_mtmd_eval_chunks(mctx, lctx, chunks, first_chunk, n_past, C.byref(p),
                                                       C.byref(result))
        return status, result

    def generate_mtmd(self, mctx, lctx, chunks, n_predict, first_chunk=0, n_past=0, byte=None, hook=None,
                      mtmd_hook=None, seq_id=0, sampler=None, on_token=None, on_token_data=None, max_stop_ms=0.0,
                      n_batch=0, options=0):
        """A multimodal generation, as 2.0 makes it: mtmd_eval_chunks() of chunks[first_chunk:] from
        n_past, then, once every chunk is in, generate(lctx, [], n_predict) from the prompt's last
        logits. (status, prompt, result, tokens): prompt, the evaluation's llama_cancel_mtmd_result
        (n_chunks_done, n_past: where the prompt stands); result, the token loop's
        llama_cancel_generate_result, or None when the prompt stopped or failed (status is then the
        evaluation's: call again with first_chunk=prompt.n_chunks_done, n_past=prompt.n_past and the
        same options). A token loop that stopped resumes as generate()'s does (its unfinished
        tokens as the prompt), not through this."""
        status, prompt = self.mtmd_eval_chunks(mctx, lctx, chunks, first_chunk, n_past, byte, hook, mtmd_hook,
                                               seq_id, n_batch, max_stop_ms, options=options)
        if status != OK:
            return status, prompt, None, []
        status, result, tokens = self.generate(lctx, [], n_predict, byte, hook, seq_id, sampler, on_token,
                                               on_token_data, max_stop_ms, n_batch)
        return status, prompt, result, tokens

    # --- text-to-speech (libmtmd's audio generation; llama_cancel_has_mtmd()) ---

    def tts(self, lctx, mctx, text, lang=None, voice=None, sampler=None, top_p=None, temp=None, top_k=None,
            seed=None, seq_id=None, n_batch=None, max_frames=None, window=None):
        """llama_cancel_tts_init: (Tts or None, llama_cancel_tts_result). lctx: the pipeline's
        backbone, created with embeddings=True (and a decode hook bound, or the stateless callback);
        mctx: its generation projector (lc.mtmd_init(mmproj, model, mtmd_hook)). text: str (UTF-8) or
        bytes; lang: Qwen3-TTS's language (None: english); voice: an mtmd bitmap of reference audio;
        sampler: a llama_sampler chain for codebook 0 (None: greedy), kept until the Tts is closed.
        The other arguments left None keep llama_cancel_tts_default_params()'s values (seed 1, the
        pipeline's sampling and window, no frame limit, sequence 0, the context's n_batch). None with
        result.status ERROR and result.message when anything is wrong (no text, an unknown language,
        a sequence that is not empty, an mctx that generates no audio, a library without libmtmd).
        On the thread that owns lctx and mctx. The Tts keeps the last call's result (state())."""
        p = self._c.llama_cancel_tts_default_params()
        keep = [voice, sampler]  # what the library keeps pointers to until free
        p.text = text.encode() if isinstance(text, str) else text
        p.lang = lang.encode() if isinstance(lang, str) else lang
        p.voice, p.sampler = voice, sampler
        for name, value in (("top_p", top_p), ("temp", temp), ("top_k", top_k), ("seed", seed), ("seq_id", seq_id),
                            ("n_batch", n_batch), ("max_frames", max_frames), ("window", window)):
            if value is not None:
                setattr(p, name, value)
        result = llama_cancel_tts_result()
        ptr = self._c.llama_cancel_tts_init(lctx, mctx, C.byref(p), C.byref(result))
        return (Tts(self, ptr, keep, result) if ptr else None), result

    def tts_run_params(self, byte=None, hook=None, mtmd_hook=None, n_frames=0, max_stop_ms=0.0, on_frame=None,
                       on_frame_data=None):
        """A llama_cancel_tts_run_params; hook / mtmd_hook: the hooks bound to lctx and mctx (None:
        found); on_frame: a native callback's address (native_address()), or None. Tts.generate()
        also takes a Python callable."""
        rp = self._c.llama_cancel_tts_run_default_params()
        rp.byte = byte.ptr if byte else None
        rp.hook, rp.mtmd_hook, rp.n_frames, rp.max_stop_ms = hook, mtmd_hook, n_frames, max_stop_ms
        rp.on_frame, rp.on_frame_data = on_frame, on_frame_data
        return rp

    def gen_audio_process(self, mctx, inp, out, byte=None, mtmd_hook=None):
        """llama_cancel_mtmd_gen_audio_process(mctx, inp, out) under `byte`: (status,
        llama_cancel_gen_audio_result: status, step, message). inp: an mtmd.mtmd_gen_inp
        (lc.mtmd.mtmd_gen_inp_default(mctx)), out: an mtmd.mtmd_gen_out, filled on OK (owned by mctx
        until its next call) and zeroed on CANCELLED; mtmd_hook: the hook bound to mctx (None: found)."""
        p = llama_cancel_gen_audio_params(byte.ptr if byte else None, mtmd_hook)
        result = llama_cancel_gen_audio_result()
        status = self._c.llama_cancel_mtmd_gen_audio_process(mctx, C.byref(inp) if inp is not None else None,
                                                             C.byref(out) if out is not None else None, C.byref(p),
                                                             C.byref(result))
        return status, result

