'use strict';
// How the binding finds its libraries: the file names per platform and their order (pure, for
// win32, darwin and linux on any machine), and, here on Linux, that every llama.h and ggml function
// comes from the library that defines it, opened by its own name, not through llama-cancel's handle
// (which Windows' GetProcAddress cannot see through).
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { library, llamaCancel, moduleDir } = require('./host');

const { libraryFiles, candidatePaths, fileOf } = llamaCancel;
const MAJOR = llamaCancel.VERSION[0];
const P = 'void *';

test('file names on Windows', () => {
    assert.deepEqual(libraryFiles('llama-cancel', 'win32'), [['llama-cancel.dll', 'libllama-cancel.dll']]);
    assert.deepEqual(libraryFiles('llama', 'win32'), [['llama.dll', 'libllama.dll']]);
    assert.deepEqual(libraryFiles('ggml', 'win32'), [['ggml.dll', 'libggml.dll'], ['ggml-base.dll', 'libggml-base.dll']]);
    assert.deepEqual(libraryFiles('mtmd', 'win32'), [['mtmd.dll', 'libmtmd.dll']]);
});

test('file names on macOS', () => {
    assert.deepEqual(libraryFiles('llama-cancel', 'darwin'), [[`libllama-cancel.${MAJOR}.dylib`, 'libllama-cancel.dylib']]);
    assert.deepEqual(libraryFiles('llama', 'darwin'), [['libllama.0.dylib', 'libllama.dylib']]);
    assert.deepEqual(libraryFiles('ggml', 'darwin'),
        [['libggml.0.dylib', 'libggml.dylib'], ['libggml-base.0.dylib', 'libggml-base.dylib']]);
    assert.deepEqual(libraryFiles('mtmd', 'darwin'), [['libmtmd.0.dylib', 'libmtmd.dylib']]);
});

test('file names on Linux', () => {
    assert.deepEqual(libraryFiles('llama-cancel', 'linux'), [[`libllama-cancel.so.${MAJOR}`, 'libllama-cancel.so']]);
    assert.deepEqual(libraryFiles('llama', 'linux'), [['libllama.so.0', 'libllama.so']]);
    assert.deepEqual(libraryFiles('ggml', 'linux'), [['libggml.so.0', 'libggml.so'], ['libggml-base.so.0', 'libggml-base.so']]);
    assert.deepEqual(libraryFiles('mtmd', 'linux'), [['libmtmd.so.0', 'libmtmd.so']]);
    assert.deepEqual(libraryFiles('llama', 'freebsd'), libraryFiles('llama', 'linux'), 'other ELF systems: sonames');
});

test('Windows tries the folder of llama-cancel first, the others the names first', () => {
    assert.deepEqual(candidatePaths(['llama.dll', 'libllama.dll'], 'win32', 'C:\\app\\bin'),
        ['C:\\app\\bin\\llama.dll', 'C:\\app\\bin\\libllama.dll', 'llama.dll', 'libllama.dll']);
    assert.deepEqual(candidatePaths(['llama.dll'], 'win32', null), ['llama.dll']);
    for (const [platform, names] of [['linux', ['libllama.so.0', 'libllama.so']],
        ['darwin', ['libllama.0.dylib', 'libllama.dylib']]]) {
        assert.deepEqual(candidatePaths(names, platform, '/opt/lc/lib'), [...names, ...names.map((n) => `/opt/lc/lib/${n}`)]);
    }
    assert.deepEqual(llamaCancel.ENV, {
        'llama-cancel': 'LLAMA_CANCEL_LIBRARY', llama: 'LLAMA_CANCEL_LLAMA_LIBRARY', ggml: 'LLAMA_CANCEL_GGML_LIBRARY',
        mtmd: 'LLAMA_CANCEL_MTMD_LIBRARY',
    });
});

const linux = process.platform === 'linux';
const real = (p) => (p ? fs.realpathSync(p) : p);

// `name` was declared from the library opened as `soname`, and its code lies in that file.
function assertFrom(lib, kind, name, soname) {
    assert.equal(lib.sources[name], soname, `${name} looked up in ${soname}'s own handle`);
    const handle = lib.handles[kind].find((h) => h.path === soname);
    const where = fileOf(handle.lib.symbol(name));
    assert.ok(path.basename(real(where)).startsWith(soname.replace(/\.0$/, '')), `${name}: ${where}`);
    assert.equal(handle.lib.symbol(name), lib.so.symbol(name), `${name}: the copy llama-cancel calls`);
}

test('llama.h functions come from libllama, ggml ones from libggml', { skip: !linux && 'Linux library names' }, () => {
    const lib = library();
    assert.deepEqual(lib.files.llama, ['libllama.so.0']);
    assert.deepEqual(lib.files.ggml, ['libggml.so.0', 'libggml-base.so.0']);
    for (const name of ['llama_decode', 'llama_init_from_model', 'llama_memory_seq_pos_max', 'llama_get_logits_ith']) {
        assertFrom(lib, 'llama', name, 'libllama.so.0');
    }
    for (const name of ['ggml_backend_load_all', 'ggml_backend_reg_by_name', 'ggml_backend_unload']) {
        assertFrom(lib, 'ggml', name, 'libggml.so.0');
        assert.equal(lib.llama[name], lib.ggml[name], 'on lib.llama too, as in 1.1.0');
    }
    const nCtx = lib.func('llama', 'llama_n_ctx', 'uint32_t', [P]);
    assert.equal(typeof nCtx, 'function');
    assert.equal(lib.sources.llama_n_ctx, 'libllama.so.0');
    if (lib.hasMtmd) {
        assert.deepEqual(lib.files.mtmd, ['libmtmd.so.0']);
        lib.func('mtmd', 'mtmd_default_marker', 'const char *', []);
        assert.equal(lib.sources.mtmd_default_marker, 'libmtmd.so.0');
    }
    const cancel = fileOf(lib.so.symbol('llama_cancel_decode'));
    assert.equal(real(cancel), real(lib.path), 'the cancel functions come from llama-cancel');
    assert.equal(real(path.join(lib.folder, path.basename(cancel))), real(lib.path));
});

test('a function missing from a library is taken from the next', { skip: !linux && 'Linux library names' }, () => {
    const lib = library();
    const base = lib.handles.ggml.find((h) => h.path === 'libggml-base.so.0');
    // libggml-base has no llama_decode: the lookup goes on to llama-cancel's handle.
    const handles = [base, { path: 'cancel', lib: lib.so }];
    const sources = {};
    const fns = llamaCancel.declareFrom(handles, [['ggml_backend_dev_name', 'const char *', [P]],
        ['llama_decode', 'int32_t', [P, llamaCancel.types.llama_batch]]], sources);
    assert.deepEqual(Object.keys(fns), ['ggml_backend_dev_name', 'llama_decode']);
    assert.deepEqual(sources, { ggml_backend_dev_name: 'libggml-base.so.0', llama_decode: 'cancel' });
    assert.throws(() => llamaCancel.declareFrom(handles, [['no_such_function', 'int', []]], {}),
        /no_such_function: in none of libggml-base.so.0, cancel/);
});

// A child node process that loads the binding with `env` added; its { status, stderr }.
function child(env) {
    const code = "require(process.env.MODULE).load(process.env.LLAMA_CANCEL_LIBRARY); console.log('loaded')";
    return spawnSync(process.execPath, ['-e', code], {
        env: { ...process.env, MODULE: moduleDir, ...env }, encoding: 'utf8', timeout: 60000,
    });
}

test('a library named in the variables that does not open, or is another copy, is an error',
    { skip: !linux && 'Linux library names' }, () => {
        const missing = child({ LLAMA_CANCEL_LLAMA_LIBRARY: '/nonexistent/libllama.so' });
        assert.notEqual(missing.status, 0, missing.stdout);
        assert.match(missing.stderr, /\$LLAMA_CANCEL_LLAMA_LIBRARY: \/nonexistent\/libllama.so/);
        assert.equal(child({ LLAMA_CANCEL_LLAMA_LIBRARY: '' }).status, 0, 'an empty variable: the search');

        const lib = library();
        const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'llama-cancel-'));
        try {
            const copy = path.join(tmp, 'libllama.so.0');
            fs.copyFileSync(real(fileOf(lib.handles.llama[0].lib.symbol('llama_decode'))), copy);
            const other = child({ LLAMA_CANCEL_LLAMA_LIBRARY: copy });
            assert.notEqual(other.status, 0, other.stdout);
            assert.match(other.stderr, /another copy of llama_\w+ than llama-cancel's/);
            assert.ok(other.stderr.includes(copy), other.stderr);
        } finally {
            fs.rmSync(tmp, { recursive: true, force: true });
        }
    });
