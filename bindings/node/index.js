'use strict';
// llama-cancel for Node: stop an in-flight llama.cpp computation from any thread by storing one
// byte. JavaScript on koffi, no compiled addon.
//
//   const lc = require('llama-cancel').load();           // finds libllama-cancel, checks its ABI
//   const byte = new Byte();                             // the byte, in native memory
//   const done = lc.decodeAsync(ctx, batch, { byte });   // koffi runs it on a worker thread
//   byte.set();                                          // main thread: the decode returns CANCELLED
//
// Text-to-speech: lc.tts(lctx, mctx, text, opts) gives a Tts whose generateAsync() runs on koffi's
// worker thread while the main thread stores the byte; generate again to resume.
//
// The struct layouts below: llama-cancel.h's, llama.h's and mtmd.h's from layouts.js (generated from
// the headers by scripts/gen_layouts.py); load() compares each with the library, size and every
// field's offset (llama_cancel_struct_size / llama_cancel_field_offset; mtmd.h's where the library
// has libmtmd), and throws on any difference.
// A library of the same MAJOR and a MINOR at least VERSION's is accepted (semantic versioning).
const koffi = require('koffi');
const nodePath = require('node:path');
const { LAYOUTS, LLAMA_LAYOUTS, MTMD_LAYOUTS } = require('./layouts');

const VERSION = [2, 0, 0]; // the header version these declarations follow
const OK = 0, CANCELLED = 1, ERROR = -1;
const STOP = { LENGTH: 0, EOG: 1, CANCELLED: 2, ERROR: 3 };
// enum llama_cancel_reach: where a decode's byte was read (result.reach). GRAPH: inside every graph
// (a llama-cancel eval callback ran in it: every backend); CPU: the abort callback alone (another
// device's split ran to its end: bind a hook); CALLS: between llama_decode calls.
const REACH = { GRAPH: 0, CPU: 1, CALLS: 2 };
const MTMD_BATCH_ENCODE = 1; // a bit of llama_cancel_mtmd_params.options (LLAMA_CANCEL_MTMD_BATCH_ENCODE)
// enum llama_cancel_tts_step: the text-to-speech step that stopped (CANCELLED) or failed (ERROR)
const TTS_STEP = { NONE: 0, VOICE: 1, PROMPT: 2, GEN_CODE: 3, BACKBONE: 4, GEN_WAV: 5, BETWEEN: 6 };
// enum mtmd_gen_audio_type (mtmd.h)
const MTMD_GEN_AUDIO_TYPE = { NONE: 0, QWEN3TTS: 1, POCKETTTS: 2 };

// Pointers are plain 'void *' (BigInt or null): memory shared with a call on a worker thread must
// be native memory (koffi.alloc), never a JS buffer that the garbage collector may move.
const P = 'void *';
// The koffi type of each field kind of layouts.js (generated from the headers by
// scripts/gen_layouts.py; 'char[N]' is a char array, read as a JS string). Pointer kinds are plain
// pointers: `byte` (const int8_t *, a Byte's address), `bytes` (const int8_t * const *, an array
// of them), `ptr` (handles, native callbacks, user data), and the arrays of llama.h's and mtmd.h's
// structs (`i8*`, `i32*`, `f32*`, `i32**`: a llama_batch's tokens...); `str` fields
// (llama_cancel_tts_params' text and lang) are JS strings, converted for llama_cancel_tts_init only
// (the library copies them). `enum` is a C enum (an int), `usize` size_t.
const KOFFI_TYPES = {
    i32: 'int32_t', u32: 'uint32_t', i64: 'int64_t', u64: 'uint64_t', f32: 'float', f64: 'double', bool: 'bool',
    enum: 'int', usize: 'size_t',
    ptr: P, byte: P, bytes: P, str: 'const char *', 'i8*': P, 'i32*': P, 'f32*': P, 'i32**': P,
};
function koffiType(kind) {
    const array = /^char\[(\d+)\]$/.exec(kind);
    if (array) return koffi.array('char', Number(array[1]));
    if (!(kind in KOFFI_TYPES)) {
        throw new Error(`layouts.js has field kind '${kind}', which index.js's KOFFI_TYPES does not map`);
    }
    return KOFFI_TYPES[kind];
}
// The koffi structs of generated layouts (struct name -> [[field, kind], ...]), by their C names, in
// the headers' order: a struct added to a header comes with no code change here.
function structsOf(layouts) {
    const out = {};
    for (const [name, fields] of Object.entries(layouts)) {
        out[name] = koffi.struct(name, Object.fromEntries(fields.map(([field, kind]) => [field, koffiType(kind)])));
    }
    return out;
}
// llama.h's, llama-cancel.h's and mtmd.h's (mtmd.h's gen structs are experimental in 0.7.0). Each is
// checked at load, size and every field's offset; mtmd.h's where the library has libmtmd.
const T = { ...structsOf(LLAMA_LAYOUTS), ...structsOf(LAYOUTS), ...structsOf(MTMD_LAYOUTS) };
// bool (*)(int32_t n_frames, int64_t n_samples, void *): llama_cancel_tts_frame_callback
const TtsFrameCallback = koffi.proto(
    'bool llama_cancel_tts_frame_callback(int32_t n_frames, int64_t n_samples, void *data)');
// What load() checks, by header.
const CANCEL_STRUCTS = Object.keys(LAYOUTS);
const LLAMA_STRUCTS = Object.keys(LLAMA_LAYOUTS);
const MTMD_STRUCTS = Object.keys(MTMD_LAYOUTS);

// Every function of llama-cancel.h, and the llama.h / ggml ones a host needs around it.
const CANCEL_FUNCTIONS = [
    ['llama_cancel_version', 'int32_t', []],
    ['llama_cancel_struct_size', 'int64_t', ['const char *']],
    ['llama_cancel_field_offset', 'int64_t', ['const char *', 'const char *']],
    ['llama_cancel_status_str', 'const char *', ['int32_t']],
    ['llama_cancel_has_mtmd', 'bool', []],
    ['llama_cancel_abort_callback', 'bool', [P]],
    ['llama_cancel_eval_callback', 'bool', [P, 'bool', P]],
    ['llama_cancel_hook_default_params', T.llama_cancel_hook_params, []],
    ['llama_cancel_hook_init', P, [P]],
    ['llama_cancel_hook_free', 'void', [P]],
    ['llama_cancel_hook_bind', 'bool', [P, P]],
    ['llama_cancel_hook_eval_callback', 'bool', [P, 'bool', P]],
    ['llama_cancel_hook_set_byte', 'void', [P, P]],
    ['llama_cancel_hook_stopped', 'bool', [P]],
    ['llama_cancel_hook_reset', 'void', [P]],
    ['llama_cancel_hook_get_stats', T.llama_cancel_hook_stats, [P]],
    ['llama_cancel_hook_get_snapshot_stats', T.llama_cancel_snapshot_stats, [P]],
    ['llama_cancel_decode_default_params', T.llama_cancel_decode_params, []],
    ['llama_cancel_decode', 'int32_t', [P, T.llama_batch, P, P, P]],
    ['llama_cancel_get_logits_ith', P, [P, P, 'int32_t']],
    ['llama_cancel_get_embeddings_ith', P, [P, P, 'int32_t']],
    ['llama_cancel_encode', 'int32_t', [P, T.llama_batch, P, P]],
    // batch: llama.h's opaque struct llama_batch_ext
    ['llama_cancel_process', 'int32_t', [P, 'int32_t', P, P, P]],
    ['llama_cancel_embed_default_params', T.llama_cancel_embed_params, []],
    ['llama_cancel_embed_n_out', 'int32_t', [P]],
    ['llama_cancel_embed', 'int32_t', [P, T.llama_batch, P, P, 'int64_t', P]],
    ['llama_cancel_generate_default_params', T.llama_cancel_generate_params, []],
    ['llama_cancel_generate', 'int32_t', [P, P, 'int32_t', P, P, 'int32_t', P]],
    ['llama_cancel_stop_reason_str', 'const char *', ['int32_t']],
    ['llama_cancel_model_load', P, ['const char *', T.llama_model_params, P, P]],
    ['llama_cancel_mtmd_init_from_file', P, ['const char *', P, P, 'int32_t', 'bool', P, P]],
    ['llama_cancel_mtmd_default_params', T.llama_cancel_mtmd_params, []],
    ['llama_cancel_mtmd_eval_chunks', 'int32_t', [P, P, P, 'int32_t', 'int32_t', P, P]],
    ['llama_cancel_tts_default_params', T.llama_cancel_tts_params, []],
    ['llama_cancel_tts_run_default_params', T.llama_cancel_tts_run_params, []],
    ['llama_cancel_tts_init', P, [P, P, koffi.pointer(T.llama_cancel_tts_params), P]],
    ['llama_cancel_tts_free', 'void', [P]],
    ['llama_cancel_tts_generate', 'int32_t', [P, P, P]],
    ['llama_cancel_tts_flush', 'int32_t', [P, P, P]],
    ['llama_cancel_tts_get_pcm', P, [P, P]],
    // inp, out: mtmd.h's struct mtmd_gen_inp and mtmd_gen_out, in native memory the host fills
    ['llama_cancel_mtmd_gen_audio_process', 'int32_t', [P, P, P, P, P]],
];
const LLAMA_FUNCTIONS = [
    ['llama_model_default_params', T.llama_model_params, []],
    ['llama_context_default_params', T.llama_context_params, []],
    ['llama_model_free', 'void', [P]],
    ['llama_init_from_model', P, [P, T.llama_context_params]],
    ['llama_free', 'void', [P]],
    ['llama_get_model', P, [P]],
    ['llama_get_memory', P, [P]],
    ['llama_model_get_vocab', P, [P]],
    ['llama_vocab_n_tokens', 'int32_t', [P]],
    ['llama_batch_get_one', T.llama_batch, [P, 'int32_t']],
    ['llama_batch_init', T.llama_batch, ['int32_t', 'int32_t', 'int32_t']],
    ['llama_batch_free', 'void', [T.llama_batch]],
    ['llama_decode', 'int32_t', [P, T.llama_batch]],
    ['llama_get_logits_ith', P, [P, 'int32_t']],
    ['llama_memory_clear', 'void', [P, 'bool']],
    ['llama_memory_seq_pos_max', 'int32_t', [P, 'int32_t']],
];
// The mtmd.h functions around the text-to-speech API (when llama_cancel_has_mtmd()).
const MTMD_FUNCTIONS = [
    ['mtmd_free', 'void', [P]],
    ['mtmd_gen_audio_get_info', T.mtmd_gen_audio_info, [P]],
    ['mtmd_bitmap_init_from_audio', P, ['size_t', P]],
    ['mtmd_bitmap_free', 'void', [P]],
];
const GGML_FUNCTIONS = [
    ['ggml_backend_load_all', 'void', []],
    ['ggml_backend_reg_by_name', P, ['const char *']],
    ['ggml_backend_unload', 'void', [P]],
];

// Where the binding finds its libraries. Each llama.h and ggml function is looked up in the library
// that defines it, opened by its own name: Windows' GetProcAddress finds only a DLL's own exports,
// never what it imports from another DLL, so llama_decode cannot be found through llama-cancel.dll
// (dlsym on Linux and macOS searches a handle's dependencies too, which the older lookup relied on).
// Per kind ('llama', 'ggml', 'mtmd'), in order:
//   1. $LLAMA_CANCEL_LLAMA_LIBRARY, $LLAMA_CANCEL_GGML_LIBRARY, $LLAMA_CANCEL_MTMD_LIBRARY: the files
//      (path.delimiter-separated) to open, and only those: one that does not open is an error.
//   2. Else the platform's names (libraryFiles()), on Windows first in the folder of the loaded
//      llama-cancel DLL, then by name; elsewhere by name (the soname libllama-cancel linked: the
//      loader hands back the copy already loaded), then in that folder (candidatePaths()).
//   3. Last, llama-cancel's own handle: a host library that links llama-cancel and llama.cpp
//      statically exports both, and on Linux and macOS dlsym reaches its dependencies through it.
// A file that defines one of the kind's functions at another address than llama-cancel's handle
// gives is another copy of llama.cpp than the one llama-cancel calls, and is not used.
const ENV = {
    'llama-cancel': 'LLAMA_CANCEL_LIBRARY', llama: 'LLAMA_CANCEL_LLAMA_LIBRARY', ggml: 'LLAMA_CANCEL_GGML_LIBRARY',
    mtmd: 'LLAMA_CANCEL_MTMD_LIBRARY',
};
// The files of each kind by stem: ggml's backend loader is in libggml, its core in libggml-base.
const STEMS = { 'llama-cancel': ['llama-cancel'], llama: ['llama'], ggml: ['ggml', 'ggml-base'], mtmd: ['mtmd'] };

function family(platform) {
    if (platform === 'win32' || platform === 'darwin') return platform;
    return 'linux'; // Linux, the BSDs, Android: ELF shared objects with sonames
}

// The file names the loader is asked for, per file of `kind` ('llama-cancel', 'llama', 'ggml',
// 'mtmd'): one array of alternative names per file (ggml: libggml, then libggml-base), for
// `platform` (a process.platform value). Pure: nothing is opened.
function libraryFiles(kind, platform = process.platform) {
    const f = family(platform);
    return STEMS[kind].map((stem) => {
        const v = kind === 'llama-cancel' ? VERSION[0] : 0; // SOVERSION: MAJOR here, 0 for llama.cpp's
        if (f === 'win32') return [`${stem}.dll`, `lib${stem}.dll`]; // MSVC builds; mingw-w64 ones
        if (f === 'darwin') return [`lib${stem}.${v}.dylib`, `lib${stem}.dylib`];
        return [`lib${stem}.so.${v}`, `lib${stem}.so`];
    });
}

// What is opened for one file, in order, given its alternative `names` and the folder of the loaded
// llama-cancel (null: unknown): on Windows each name in that folder first, then each name alone (the
// DLL search); elsewhere the names alone first, then in that folder. Pure.
function candidatePaths(names, platform = process.platform, folder = null) {
    const win = family(platform) === 'win32';
    const join = win ? nodePath.win32.join : nodePath.posix.join;
    const beside = folder ? names.map((n) => join(folder, n)) : [];
    return win ? [...beside, ...names] : [...names, ...beside];
}

let fileOfImpl = null;
// The file the code at `address` (a BigInt, as lib.symbol() gives) was loaded from, or null.
function fileOf(address) {
    if (!address) return null;
    try {
        if (!fileOfImpl) {
            if (process.platform === 'win32') {
                const k32 = koffi.load('kernel32.dll');
                const byAddress = k32.func('int __stdcall GetModuleHandleExW(uint32_t flags, void *addr, _Out_ void **module)');
                const fileName = k32.func('uint32_t __stdcall GetModuleFileNameW(void *module, void *buf, uint32_t size)');
                fileOfImpl = (a) => {
                    const module = [null];
                    // GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT
                    if (!byAddress(6, a, module)) return null;
                    const buf = Buffer.alloc(2 * 32768);
                    const n = fileName(module[0], buf, 32768);
                    return n ? buf.toString('utf16le', 0, 2 * n) : null;
                };
            } else {
                const info = koffi.struct('llama_cancel_Dl_info', {
                    dli_fname: 'const char *', dli_fbase: P, dli_sname: 'const char *', dli_saddr: P,
                });
                const dladdr = koffi.load(null).func('dladdr', 'int', [P, koffi.out(koffi.pointer(info))]);
                fileOfImpl = (a) => {
                    const out = {};
                    return dladdr(a, out) && out.dli_fname ? out.dli_fname : null;
                };
            }
        }
        return fileOfImpl(address);
    } catch {
        return null;
    }
}

// The address of `name` in a koffi library, or null.
function symbolIn(lib, name) {
    try {
        return lib.symbol(name);
    } catch {
        return null;
    }
}

// Why `lib` is not the copy llama-cancel (`cancel`, a koffi library) calls; null when it is, or
// when nothing tells (names: the kind's functions).
function otherCopy(lib, cancel, names) {
    for (const name of names) {
        const mine = symbolIn(lib, name);
        if (mine === null) continue;
        const theirs = symbolIn(cancel, name);
        if (theirs !== null && theirs !== mine) {
            return `another copy of ${name} than llama-cancel's (${fileOf(mine)} against ${fileOf(theirs)}): not used`;
        }
        return null;
    }
    return null;
}

// Opens the files of `kind` as described above: [{ path, lib }] (possibly empty: then every function
// comes from llama-cancel's handle). Throws for a file named in the kind's variable that does not
// open or is another copy.
function openKind(kind, names, cancel, folder = null, platform = process.platform, env = process.env) {
    const override = env[ENV[kind]];
    const files = override
        ? override.split(nodePath.delimiter).filter(Boolean).map((p) => [p])
        : libraryFiles(kind, platform).map((alts) => candidatePaths(alts, platform, folder));
    const handles = [];
    for (const paths of files) {
        const errors = [];
        let opened = null;
        for (const p of paths) {
            let lib;
            try {
                lib = koffi.load(p);
            } catch (e) {
                errors.push(`${p}: ${e.message}`);
                continue;
            }
            const other = otherCopy(lib, cancel, names);
            if (other) {
                errors.push(`${p}: ${other}`);
                continue;
            }
            opened = { path: p, lib };
            break;
        }
        if (opened) handles.push(opened);
        else if (override) throw new Error(`$${ENV[kind]}: ${errors.join('; ')}`);
    }
    return handles;
}

// The functions of `table`, each declared from the first of `handles` that defines it; sources[name]
// is that library's path (as opened).
function declareFrom(handles, table, sources) {
    const out = {};
    for (const [name, ret, args] of table) {
        const from = handles.find((h) => symbolIn(h.lib, name) !== null);
        if (!from) throw new Error(`${name}: in none of ${handles.map((h) => h.path).join(', ')}`);
        out[name] = from.lib.func(name, ret, args);
        sources[name] = from.path;
    }
    return out;
}

class AbiMismatch extends Error {}

// The caller-owned byte, in native memory. set() is one plain byte store (like Dart's
// `byte.value = 1`); the library only loads it. free() it after the last call that reads it.
class Byte {
    constructor() {
        this.ptr = koffi.alloc('int8_t', 1);
        this.view = new Int8Array(koffi.view(this.ptr, 1));
        this.view[0] = 0;
    }
    set() { this.view[0] = 1; }
    clear() { this.view[0] = 0; }
    get isSet() { return this.view[0] !== 0; }
    free() { koffi.free(this.ptr); this.ptr = null; }
}

// int32 values in native memory (tokens, counters), freed by free().
class NativeInt32Array {
    constructor(values) {
        this.length = values.length;
        this.ptr = koffi.alloc('int32_t', Math.max(1, values.length));
        const view = new Int32Array(koffi.view(this.ptr, 4 * Math.max(1, values.length)));
        view.set(values);
    }
    toArray(n = this.length) { return Array.from(new Int32Array(koffi.view(this.ptr, 4 * Math.max(1, n))).slice(0, n)); }
    free() { koffi.free(this.ptr); this.ptr = null; }
}

// One struct in native memory for the duration of a (possibly asynchronous) call.
function nativeStruct(type, value) {
    const ptr = koffi.alloc(type, 1);
    koffi.encode(ptr, type, value || {});
    return ptr;
}

function declare(lib, table) {
    const out = {};
    for (const [name, ret, args] of table) out[name] = lib.func(name, ret, args);
    return out;
}

// Opens libllama-cancel: `path`, else $LLAMA_CANCEL_LIBRARY, else the loader's search by the
// platform's names (libraryFiles('llama-cancel')), then llama.cpp's libraries by theirs (above).
// Throws AbiMismatch when its version or any struct layout differs from the declarations above.
function load(path) {
    const env = process.env.LLAMA_CANCEL_LIBRARY;
    const candidates = path ? [path] : env ? [env] : libraryFiles('llama-cancel')[0];
    const errors = [];
    for (const candidate of candidates) {
        try {
            return new Library(candidate);
        } catch (e) {
            if (e instanceof AbiMismatch) throw e;
            errors.push(`${candidate}: ${e.message}`);
        }
    }
    throw new Error(`cannot load libllama-cancel: ${errors.join('; ')}`);
}

class Library {
    constructor(path) {
        this.path = path;
        this.so = koffi.load(path);
        this.c = declare(this.so, CANCEL_FUNCTIONS);
        this.checkAbi();
        // The folder of the file the loader opened (a bare name too): on Windows llama.cpp's DLLs
        // are looked for there first.
        const opened = fileOf(symbolIn(this.so, 'llama_cancel_version'));
        const given = nodePath.dirname(path) !== '.' ? nodePath.dirname(nodePath.resolve(path)) : null;
        this.folder = opened ? nodePath.dirname(opened) : given;
        // Each llama.h and ggml function from the library that defines it, else from llama-cancel's
        // handle. handles[kind]: what each kind opened; files[kind] their paths; sources[name]: the
        // path of the library each declared function came from.
        this.handles = {};
        this.files = {};
        this.sources = {};
        this.hasMtmd = this.c.llama_cancel_has_mtmd();
        for (const [kind, table] of [['llama', LLAMA_FUNCTIONS], ['ggml', GGML_FUNCTIONS], ['mtmd', MTMD_FUNCTIONS]]) {
            if (kind === 'mtmd' && !this.hasMtmd) continue;
            const names = table.map(([name]) => name);
            this.handles[kind] = [...openKind(kind, names, this.so, this.folder), { path: this.path, lib: this.so }];
            this.files[kind] = this.handles[kind].slice(0, -1).map((h) => h.path);
        }
        this.ggml = declareFrom(this.handles.ggml, GGML_FUNCTIONS, this.sources);
        // ggml's functions on this.llama too, where the 1.1.0 binding declared them.
        this.llama = { ...declareFrom(this.handles.llama, LLAMA_FUNCTIONS, this.sources), ...this.ggml };
        // mtmd.h's: mtmd_free, mtmd_gen_audio_get_info, audio bitmaps; null without libmtmd.
        this.mtmd = this.hasMtmd ? declareFrom(this.handles.mtmd, MTMD_FUNCTIONS, this.sources) : null;
    }

    // Any other function of llama.cpp's, declared from the library of `kind` ('llama', 'ggml',
    // 'mtmd') that defines it: lib.func('llama', 'llama_n_ctx', 'uint32_t', ['void *']).
    func(kind, name, ret, args) {
        if (!this.handles[kind]) throw new Error(`no ${kind} library here (mtmd: llama_cancel_has_mtmd() is false)`);
        return declareFrom(this.handles[kind], [[name, ret, args]], this.sources)[name];
    }

    version() {
        const v = this.c.llama_cancel_version();
        return [Math.floor(v / 10000), Math.floor(v / 100) % 100, v % 100];
    }

    abiProblems() {
        const problems = [];
        const [major, minor, patch] = this.version();
        if (major !== VERSION[0] || minor < VERSION[1]) {
            problems.push(`library version ${major}.${minor}.${patch}, binding written for ${VERSION.join('.')} ` +
                `(needs ${VERSION[0]}.x with x >= ${VERSION[1]})`);
        }
        const names = [...CANCEL_STRUCTS, ...LLAMA_STRUCTS, ...(this.c.llama_cancel_has_mtmd() ? MTMD_STRUCTS : [])];
        for (const name of names) problems.push(...this.structProblems(name, T[name]));
        return problems;
    }

    // Differences between the library's layout of `name` and `type` (a koffi struct): its size and
    // every field's offset.
    structProblems(name, type) {
        const out = [];
        const size = Number(this.c.llama_cancel_struct_size(name));
        if (size !== koffi.sizeof(type)) out.push(`${name}: ${size} bytes in the library, ${koffi.sizeof(type)} here`);
        const declared = Object.keys(type.members);
        let end = 0;
        for (const field of declared) {
            const offset = Number(this.c.llama_cancel_field_offset(name, field));
            if (offset !== koffi.offsetof(type, field)) {
                out.push(`${name}.${field}: offset ${offset} in the library, ${koffi.offsetof(type, field)} here`);
            }
            end = Math.max(end, koffi.offsetof(type, field) + koffi.sizeof(type.members[field].type));
        }
        // llama-cancel.h's structs have no padding on 64-bit targets: a field this copy lacks at the
        // end, which the copy's tail padding would hide from the size, shows as a gap before the end.
        // (llama.h's and mtmd.h's have padding: their copies are generated whole from the headers.)
        if (name.startsWith('llama_cancel_') && koffi.sizeof('void *') === 8 && end !== size) {
            out.push(`${name}: the fields declared here end at byte ${end}, the library's struct at ${size}`);
        }
        return out;
    }

    checkAbi() {
        const problems = this.abiProblems();
        if (problems.length) throw new AbiMismatch(`${this.path}: ${problems.join('; ')}`);
    }

    // Loads ggml's dynamically built backends (as Debian ships them) and unloads BLAS, Vulkan and
    // RPC unless named in `keep`: the CPU backend, where the abort callback runs, stays.
    loadBackends(keep = []) {
        this.ggml.ggml_backend_load_all();
        for (const name of ['BLAS', 'Vulkan', 'RPC']) {
            const reg = this.ggml.ggml_backend_reg_by_name(name);
            if (reg && !keep.includes(name)) this.ggml.ggml_backend_unload(reg);
        }
    }

    // llama_cancel_model_load: { model (pointer or null), status, message }.
    modelLoad(path, byte, params) {
        const result = nativeStruct(T.llama_cancel_load_result);
        try {
            const model = this.c.llama_cancel_model_load(path, params || this.llama.llama_model_default_params(),
                byte ? byte.ptr : null, result);
            return { model, ...koffi.decode(result, T.llama_cancel_load_result) };
        } finally {
            koffi.free(result);
        }
    }

    // llama_init_from_model with the default context parameters and `fields` set on them; `hook`
    // bound as the eval callback (throws when fields already set cb_eval: chain it through hook()).
    context(model, fields = {}, hook = null) {
        const cp = Object.assign(this.llama.llama_context_default_params(), fields);
        if (!hook) return this.llama.llama_init_from_model(model, cp);
        const native = nativeStruct(T.llama_context_params, cp);
        try {
            if (!this.c.llama_cancel_hook_bind(hook, native)) {
                throw new Error('llama_cancel_hook_bind refused: cb_eval is already set (chain it through hook())');
            }
            return this.llama.llama_init_from_model(model, koffi.decode(native, T.llama_context_params));
        } finally {
            koffi.free(native);
        }
    }

    // llama_cancel_hook_init; `chain` is a native eval callback's address (lib.symbol(name)).
    hook(byte, { intervalMs = 0, chain = null, chainData = null } = {}) {
        const p = nativeStruct(T.llama_cancel_hook_params,
            { byte: byte ? byte.ptr : null, interval_ms: intervalMs, chain, chain_data: chainData });
        try {
            return this.c.llama_cancel_hook_init(p);
        } finally {
            koffi.free(p);
        }
    }

    // A llama_batch_get_one batch over tokens in native memory: { batch, tokens } (free tokens after).
    tokensBatch(values) {
        const tokens = new NativeInt32Array(values);
        return { batch: this.llama.llama_batch_get_one(tokens.ptr, tokens.length), tokens };
    }

    // A copy of the logits of batch index i after decode() returned OK with `result` (the result
    // object it gave), through llama_cancel_get_logits_ith: right on every path; null when absent.
    logitsIth(ctx, result, i) {
        const native = nativeStruct(T.llama_cancel_decode_result, result);
        try {
            const ptr = this.c.llama_cancel_get_logits_ith(ctx, native, i);
            if (!ptr) return null;
            const n = this.llama.llama_vocab_n_tokens(this.llama.llama_model_get_vocab(this.llama.llama_get_model(ctx)));
            return Array.from(koffi.decode(ptr, koffi.array('float', n)));
        } finally {
            koffi.free(native);
        }
    }

    // The per-sequence arrays in native memory: the bytes of opts.seqBytes (a Byte or null per
    // sequence) and the results, of seqBytes.length entries, else opts.nSeq; null when none.
    seqArrays(seqBytes, nSeq) {
        const n = seqBytes ? seqBytes.length : (nSeq || 0);
        if (n === 0) return null;
        let flags = null;
        if (seqBytes) {
            flags = koffi.alloc('void *', n);
            koffi.encode(flags, koffi.array('void *', n), seqBytes.map((f) => (f ? f.ptr : null)));
        }
        // Impossible values, so that a field the library failed to write cannot pass for an answer.
        const seqs = koffi.alloc(T.llama_cancel_seq_result, n);
        koffi.encode(seqs, koffi.array(T.llama_cancel_seq_result, n),
            new Array(n).fill({ n_committed: -2, output: -2, cancelled: -2 }));
        return {
            n, flags, seqs,
            read: () => koffi.decode(seqs, koffi.array(T.llama_cancel_seq_result, n)),
            free: () => { if (flags) koffi.free(flags); koffi.free(seqs); },
        };
    }

    decodeCall(ctx, batch, opts) {
        const seq = this.seqArrays(opts.seqBytes, opts.nSeq);
        const params = nativeStruct(T.llama_cancel_decode_params, {
            ...this.c.llama_cancel_decode_default_params(),
            byte: opts.byte ? opts.byte.ptr : null, hook: opts.hook || null,
            abort_callback: opts.abortCallback || null, abort_callback_data: opts.abortCallbackData || null,
            seq_bytes: seq ? seq.flags : null, max_stop_ms: opts.maxStopMs || 0, n_seq: seq ? seq.n : 0,
        });
        const result = nativeStruct(T.llama_cancel_decode_result);
        const args = [ctx, batch, params, result, seq ? seq.seqs : null];
        const finish = (status) => {
            const out = { status, result: koffi.decode(result, T.llama_cancel_decode_result), seqs: seq ? seq.read() : [] };
            koffi.free(params); koffi.free(result); if (seq) seq.free();
            return out;
        };
        return { args, finish };
    }

    // llama_cancel_decode on this thread: { status, result, seqs }, seqs[s] = { n_committed, output
    // (llama_get_logits_ith index of its last output, -1: none), cancelled (1: dropped) } per
    // sequence. result.reach (REACH.GRAPH, .CPU, .CALLS) says where the byte was read: REACH.CPU on a
    // context with layers off the CPU means a stop there waited for whole graphs (bind a hook). opts:
    // byte, hook, abortCallback / abortCallbackData (native), maxStopMs, seqBytes (a Byte or null per
    // sequence: setting one drops that sequence alone), nSeq (results without bytes).
    decode(ctx, batch, opts = {}) {
        const { args, finish } = this.decodeCall(ctx, batch, opts);
        return finish(this.c.llama_cancel_decode(...args));
    }

    // The same through koffi's asynchronous call: it runs on a worker thread while this (the main)
    // thread stays free to store the byte. Resolves to { status, result, seqs }.
    decodeAsync(ctx, batch, opts = {}) {
        const { args, finish } = this.decodeCall(ctx, batch, opts);
        return new Promise((resolve, reject) => {
            this.c.llama_cancel_decode.async(...args, (err, status) => (err ? reject(err) : resolve(finish(status))));
        });
    }

    // Sequences (arrays of tokens, sequence i with id i) as one llama_batch_init batch, every token an
    // output, from sequence `first` on: { batch, free }.
    sequencesBatch(sequences, first) {
        const todo = sequences.slice(first);
        const n = todo.reduce((a, t) => a + t.length, 0);
        const b = this.llama.llama_batch_init(Math.max(n, 1), 0, 1);
        const tok = [], pos = [], seqPtrs = koffi.decode(b.seq_id, koffi.array(P, Math.max(n, 1)));
        let i = 0;
        todo.forEach((t, k) => t.forEach((id, j) => {
            tok.push(id); pos.push(j);
            koffi.encode(seqPtrs[i++], 'int32_t', first + k);
        }));
        if (n > 0) {
            koffi.encode(b.token, koffi.array('int32_t', n), tok);
            koffi.encode(b.pos, koffi.array('int32_t', n), pos);
            koffi.encode(b.n_seq_id, koffi.array('int32_t', n), new Array(n).fill(1));
            koffi.encode(b.logits, koffi.array('int8_t', n), new Array(n).fill(1));
        }
        b.n_tokens = n;
        return { batch: b, free: () => this.llama.llama_batch_free(b) };
    }

    embedCall(ctx, sequences, opts) {
        const nOut = this.c.llama_cancel_embed_n_out(ctx);
        if (nOut <= 0) throw new Error('the context pools no embeddings (embeddings: true and a pooling type)');
        const first = opts.first || 0;
        const out = opts.out || koffi.alloc('float', sequences.length * nOut);
        const { batch, free } = this.sequencesBatch(sequences, first);
        const params = nativeStruct(T.llama_cancel_embed_params, {
            ...this.c.llama_cancel_embed_default_params(),
            byte: opts.byte ? opts.byte.ptr : null, hook: opts.hook || null,
            abort_callback: opts.abortCallback || null, abort_callback_data: opts.abortCallbackData || null,
        });
        const result = nativeStruct(T.llama_cancel_embed_result);
        const args = [ctx, batch, params, out, sequences.length * nOut, result];
        const finish = (status) => {
            const r = koffi.decode(result, T.llama_cancel_embed_result);
            const done = first + (status === OK ? sequences.length - first : r.n_seq_done);
            const all = koffi.decode(out, koffi.array('float', sequences.length * nOut));
            const rows = sequences.map((_, s) => (s < done ? Array.from(all.slice(s * nOut, (s + 1) * nOut)) : null));
            free(); koffi.free(params); koffi.free(result);
            return { status, result: r, rows, out, nDone: done };
        };
        return { args, finish };
    }

    // llama_cancel_embed over sequences (arrays of tokens; sequence i has id i, below the context's
    // n_seq_max): { status, result, rows, out, nDone }, rows[i] the pooled vector of sequence i (a
    // reranker's score list) or null while not done. A stop keeps sequences[0, nDone); resume with
    // opts.first = nDone and opts.out = the `out` it gave (native floats; koffi.free it at the end).
    // opts: byte, hook, first, out, abortCallback / abortCallbackData (native, as in decode).
    embed(ctx, sequences, opts = {}) {
        const { args, finish } = this.embedCall(ctx, sequences, opts);
        return finish(this.c.llama_cancel_embed(...args));
    }

    // The same on koffi's worker thread, while this thread stays free to store the byte.
    embedAsync(ctx, sequences, opts = {}) {
        const { args, finish } = this.embedCall(ctx, sequences, opts);
        return new Promise((resolve, reject) => {
            this.c.llama_cancel_embed.async(...args, (err, status) => (err ? reject(err) : resolve(finish(status))));
        });
    }

    generateCall(ctx, prompt, nPredict, opts) {
        const tokens = new NativeInt32Array(prompt);
        const out = new NativeInt32Array(new Array(Math.max(1, nPredict)).fill(0));
        const params = nativeStruct(T.llama_cancel_generate_params, {
            ...this.c.llama_cancel_generate_default_params(),
            byte: opts.byte ? opts.byte.ptr : null, n_predict: nPredict, seq_id: opts.seqId || 0,
            sampler: opts.sampler || null, hook: opts.hook || null,
            on_token: opts.onToken || null, on_token_data: opts.onTokenData || null, max_stop_ms: opts.maxStopMs || 0,
            n_batch: opts.nBatch || 0,
        });
        const result = nativeStruct(T.llama_cancel_generate_result);
        const args = [ctx, tokens.ptr, prompt.length, params, out.ptr, nPredict, result];
        const finish = (status) => {
            const r = koffi.decode(result, T.llama_cancel_generate_result);
            const res = { status, result: r, tokens: out.toArray(r.n_generated) };
            tokens.free(); out.free(); koffi.free(params); koffi.free(result);
            return res;
        };
        return { args, finish };
    }

    // llama_cancel_generate (the token loop): { status, result, tokens }. opts: byte, hook, seqId,
    // sampler, onToken / onTokenData (native), maxStopMs, nBatch (prompt tokens per decode; 0: the
    // context's).
    generate(ctx, prompt, nPredict, opts = {}) {
        const { args, finish } = this.generateCall(ctx, prompt, nPredict, opts);
        return finish(this.c.llama_cancel_generate(...args));
    }

    // The same on a koffi worker thread; resolves to { status, result, tokens }.
    generateAsync(ctx, prompt, nPredict, opts = {}) {
        const { args, finish } = this.generateCall(ctx, prompt, nPredict, opts);
        return new Promise((resolve, reject) => {
            this.c.llama_cancel_generate.async(...args, (err, status) => (err ? reject(err) : resolve(finish(status))));
        });
    }

    // --- multimodal and text-to-speech (llama_cancel_has_mtmd()) ---

    // llama_cancel_mtmd_init_from_file: { mctx (pointer or null), status, message }. mtmdHook: the
    // hook that becomes mctx's cb_eval (its encodes'; for text-to-speech, its GEN_CODE and GEN_WAV
    // graphs'), passed again as mtmdHook to the calls on mctx.
    mtmdInit(mmprojPath, model, { mtmdHook = null, nThreads = 0, useGpu = false, byte = null } = {}) {
        const result = nativeStruct(T.llama_cancel_load_result);
        try {
            const mctx = this.c.llama_cancel_mtmd_init_from_file(mmprojPath, model, mtmdHook, nThreads, useGpu,
                byte ? byte.ptr : null, result);
            return { mctx, ...koffi.decode(result, T.llama_cancel_load_result) };
        } finally {
            koffi.free(result);
        }
    }

    // llama_cancel_tts_init: { tts (a Tts, or null), status, message, result }. lctx: the pipeline's
    // backbone, made with { embeddings: true } (and a decode hook bound, or the stateless callback);
    // mctx: its generation projector (mtmdInit(mmproj, model, { mtmdHook })). opts: lang
    // (Qwen3-TTS; null: english), voice (an mtmd bitmap of reference audio), sampler (a llama_sampler
    // for codebook 0, kept until free), topP, temp, topK, seed, seqId, nBatch, maxFrames, window; one
    // left out keeps llama_cancel_tts_default_params()'s value. null with status ERROR and message
    // when anything is wrong (no text, an unknown language, a sequence that is not empty, ...).
    tts(lctx, mctx, text, opts = {}) {
        const p = this.c.llama_cancel_tts_default_params();
        p.text = text === undefined ? null : text;
        p.lang = opts.lang || null;
        p.voice = opts.voice || null;
        p.sampler = opts.sampler || null;
        for (const [key, field] of [['topP', 'top_p'], ['temp', 'temp'], ['topK', 'top_k'], ['seed', 'seed'],
            ['seqId', 'seq_id'], ['nBatch', 'n_batch'], ['maxFrames', 'max_frames'], ['window', 'window']]) {
            if (opts[key] !== undefined && opts[key] !== null) p[field] = opts[key];
        }
        const result = nativeStruct(T.llama_cancel_tts_result);
        try {
            const ptr = this.c.llama_cancel_tts_init(lctx, mctx, p, result);
            const r = ttsResult(result);
            return { tts: ptr ? new Tts(this, ptr, r) : null, status: r.status, message: r.message, result: r };
        } finally {
            koffi.free(result);
        }
    }

    // llama_cancel_mtmd_gen_audio_process(mctx, inp, out) under opts.byte (opts.mtmdHook: the hook
    // bound to mctx; null: found): { status, result }, result a llama_cancel_gen_audio_result
    // { status, step, message } (step TTS_STEP.GEN_CODE or .GEN_WAV when stopped or failed). inp and
    // out: native memory holding mtmd.h's struct mtmd_gen_inp and mtmd_gen_out (out is libmtmd's on
    // OK, zeroed on CANCELLED).
    genAudioProcess(mctx, inp, out, opts = {}) {
        const params = nativeStruct(T.llama_cancel_gen_audio_params, {
            byte: opts.byte ? opts.byte.ptr : null, mtmd_hook: opts.mtmdHook || null,
        });
        const result = nativeStruct(T.llama_cancel_gen_audio_result);
        try {
            const status = this.c.llama_cancel_mtmd_gen_audio_process(mctx, inp, out, params, result);
            return { status, result: koffi.decode(result, T.llama_cancel_gen_audio_result) };
        } finally {
            koffi.free(params);
            koffi.free(result);
        }
    }
}

// A llama_cancel_tts_result in native memory, as an object whose n_samples is a Number.
function ttsResult(at) {
    const value = koffi.decode(at, T.llama_cancel_tts_result);
    return { ...value, n_samples: Number(value.n_samples) };
}

// One generation (llama_cancel_tts *), made by Library.tts(): its prompt, frames, streaming state
// and PCM. One call at a time: generate, flush, pcm and state throw while an asynchronous call of
// the same Tts runs. free() it before the contexts it was made on.
class Tts {
    // `result`: llama_cancel_tts_init's, kept as state() until a call runs.
    constructor(lib, ptr, result = null) {
        this.lib = lib;
        this.ptr = ptr;
        this.busy = false;
        this.last = result ? { ...result } : null;
    }

    free() {
        if (this.busy) throw new Error('llama_cancel_tts: a call of this generation is still running');
        if (this.ptr) this.lib.c.llama_cancel_tts_free(this.ptr);
        this.ptr = null;
    }

    enter() {
        if (!this.ptr) throw new Error('llama_cancel_tts: this generation was freed');
        if (this.busy) throw new Error('llama_cancel_tts: a call of this generation is already running');
        this.busy = true;
    }

    // The run params and result in native memory (alive until an asynchronous call returns), and
    // finish(status), which reads the result, frees them and ends the call. opts.onFrame: a JS
    // function (n_frames, n_samples) => bool, or a native callback's address with opts.onFrameData.
    runCall(opts) {
        let onFrame = opts.onFrame || null;
        let registered = null;
        const raised = [];
        if (typeof onFrame === 'function') {
            const user = onFrame;
            // Called on the generating thread; from koffi's worker, koffi queues it to this (the
            // main) thread's event loop and the worker waits for its answer.
            registered = koffi.register((nFrames, nSamples) => {
                try {
                    return Boolean(user(nFrames, Number(nSamples)));
                } catch (e) { // stops the generation; thrown again by the call
                    raised.push(e);
                    return false;
                }
            }, koffi.pointer(TtsFrameCallback));
            onFrame = registered;
        }
        const params = nativeStruct(T.llama_cancel_tts_run_params, {
            ...this.lib.c.llama_cancel_tts_run_default_params(),
            byte: opts.byte ? opts.byte.ptr : null, hook: opts.hook || null,
            mtmd_hook: opts.mtmdHook || null, on_frame: onFrame, on_frame_data: opts.onFrameData || null,
            max_stop_ms: opts.maxStopMs || 0, n_frames: opts.nFrames || 0,
        });
        const result = nativeStruct(T.llama_cancel_tts_result);
        const finish = (status) => {
            const r = ttsResult(result);
            this.last = { ...r }; // state(), before an onFrame error is thrown
            koffi.free(params);
            koffi.free(result);
            if (registered) koffi.unregister(registered);
            this.busy = false;
            if (raised.length) throw raised[0];
            return { status, result: r };
        };
        return { args: [this.ptr, params, result], finish };
    }

    call(name, opts) {
        this.enter();
        let call;
        try {
            call = this.runCall(opts);
        } catch (e) {
            this.busy = false;
            throw e;
        }
        return call.finish(this.lib.c[name](...call.args));
    }

    callAsync(name, opts) {
        this.enter();
        let call;
        try {
            call = this.runCall(opts);
        } catch (e) {
            this.busy = false;
            return Promise.reject(e);
        }
        return new Promise((resolve, reject) => {
            this.lib.c[name].async(...call.args, (err, status) => {
                try {
                    const out = call.finish(err ? -1 : status);
                    if (err) reject(err); else resolve(out);
                } catch (e) {
                    reject(e);
                }
            });
        });
    }

    // llama_cancel_tts_generate on this thread: { status, result }. Runs the generation on from where
    // it is, opts.nFrames frames more (0: to its end). OK: done (result.finished 1 at the end, every
    // frame then in the PCM); CANCELLED: the byte stopped it at a committed step (result.step, one of
    // TTS_STEP), call again to resume; ERROR: result.message. opts: byte, hook, mtmdHook (the hooks
    // bound to lctx and mctx; null: found), nFrames, maxStopMs, onFrame / onFrameData.
    generate(opts = {}) { return this.call('llama_cancel_tts_generate', opts); }

    // The same on koffi's worker thread, while this (the main) thread stays free to store the byte;
    // resolves to { status, result }.
    generateAsync(opts = {}) { return this.callAsync('llama_cancel_tts_generate', opts); }

    // llama_cancel_tts_flush: GEN_WAV of the frames not yet in the PCM, now (the generation is then
    // finished); { status, result }. flushAsync: on koffi's worker.
    flush(opts = {}) { return this.call('llama_cancel_tts_flush', { ...opts, onFrame: null, nFrames: 0 }); }
    flushAsync(opts = {}) { return this.callAsync('llama_cancel_tts_flush', { ...opts, onFrame: null, nFrames: 0 }); }

    // A copy of the PCM so far: a Float32Array of mono samples at state().sample_rate.
    pcm() {
        this.enter();
        const n = koffi.alloc('int64_t', 1);
        try {
            const ptr = this.lib.c.llama_cancel_tts_get_pcm(this.ptr, n);
            const count = Number(koffi.decode(n, 'int64_t'));
            return ptr && count > 0 ? new Float32Array(koffi.view(ptr, 4 * count).slice(0)) : new Float32Array(0);
        } finally {
            koffi.free(n);
            this.busy = false;
        }
    }

    // Where the generation stands: a copy of the llama_cancel_tts_result of the last generate or
    // flush (status, stop_reason and step of that call, frames, samples, finished; init's before
    // any), which this object keeps (the header has no getter since 2.0).
    state() {
        this.enter();
        try {
            return { ...this.last };
        } finally {
            this.busy = false;
        }
    }
}

module.exports = {
    load, Library, Tts, Byte, NativeInt32Array, AbiMismatch, types: T, VERSION,
    OK, CANCELLED, ERROR, STOP, REACH, MTMD_BATCH_ENCODE, TTS_STEP, MTMD_GEN_AUDIO_TYPE,
    ENV, libraryFiles, candidatePaths, fileOf, openKind, declareFrom,
};
