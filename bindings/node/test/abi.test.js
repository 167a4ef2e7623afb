'use strict';
// The binding's layouts match the loaded library (llama-cancel.h's, llama.h's and mtmd.h's structs,
// every field), and a wrong one is reported, not used.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const koffi = require('koffi');
const { env, library, llamaCancel, moduleDir } = require('./host');

test('version and every layout match the library', () => {
    const lib = library();
    const members = Object.keys(llamaCancel.types.llama_cancel_decode_result.members);
    assert.deepEqual(members.slice(0, 5), ['status', 'n_committed', 'output_base', 'n_seq_cancelled', 'reach'],
        'koffi lists the fields checked');
    assert.deepEqual(lib.version(), llamaCancel.VERSION);
    const pkg = JSON.parse(fs.readFileSync(path.join(moduleDir, 'package.json'), 'utf8'));
    assert.equal(pkg.version, llamaCancel.VERSION.join('.'), "package.json's version is the header's");
    assert.deepEqual(lib.abiProblems(), []);
    assert.equal(lib.c.llama_cancel_status_str(llamaCancel.CANCELLED), 'cancelled');
});

// A struct type like `type` with its fields changed by `edit` (an array of [name, type] pairs).
function variant(type, edit) {
    return koffi.struct(edit(Object.entries(type.members).map(([k, m]) => [k, m.type]))
        .reduce((o, [k, t]) => Object.assign(o, { [k]: t }), {}));
}

test('a layout that differs from the library is reported', () => {
    const lib = library();
    const T = llamaCancel.types;
    const shifted = variant(T.llama_cancel_decode_params, (f) => f.slice(1)); // every offset moves
    let problems = lib.structProblems('llama_cancel_decode_params', shifted);
    assert.ok(problems.some((p) => p.includes('llama_cancel_decode_params.hook: offset')), problems.join('; '));
    assert.ok(problems.some((p) => p.includes('bytes in the library')), problems.join('; '));

    const short = variant(T.llama_cancel_decode_params, (f) => f.slice(0, -1)); // tail padding keeps the size
    assert.equal(koffi.sizeof(short), koffi.sizeof(T.llama_cancel_decode_params));
    problems = lib.structProblems('llama_cancel_decode_params', short);
    assert.ok(problems.some((p) => p.includes('fields declared here end at byte 44')), problems.join('; '));

    const narrow = variant(T.llama_cancel_seq_result, (f) => [...f.slice(0, 2), ['cancelled', 'int8_t']]);
    assert.equal(koffi.sizeof(narrow), koffi.sizeof(T.llama_cancel_seq_result));
    problems = lib.structProblems('llama_cancel_seq_result', narrow);
    assert.ok(problems.some((p) => p.includes('fields declared here end at byte 9')), problems.join('; '));

    assert.equal(Number(lib.c.llama_cancel_struct_size('no_such_struct')), 0);
    assert.equal(Number(lib.c.llama_cancel_field_offset('llama_cancel_decode_params', 'nope')), -1);
});

// A copy of koffi struct `type` with fields `a` and `b` named the other way round (same size).
function swapped(type, a, b) {
    return variant(type, (f) => f.map(([k, t]) => [k === a ? b : k === b ? a : k, t]));
}

// The AbiMismatch message of a fresh load() with `copy` in place of the binding's struct `name`.
function loadWith(name, copy) {
    const T = llamaCancel.types;
    const real = T[name];
    T[name] = copy;
    try {
        llamaCancel.load(env('LLAMA_CANCEL_LIBRARY'));
    } catch (e) {
        assert.ok(e instanceof llamaCancel.AbiMismatch, e.stack);
        return e.message;
    } finally {
        T[name] = real;
    }
    assert.fail(`load() accepted ${name} with two fields swapped`);
}

test('two swapped fields of a llama.h struct fail load(), each named', () => {
    const T = llamaCancel.types;
    for (const [name, a, b] of [['llama_context_params', 'n_ctx', 'n_batch'], ['llama_batch', 'token', 'embd']]) {
        const copy = swapped(T[name], a, b);
        assert.equal(koffi.sizeof(copy), koffi.sizeof(T[name]), 'the size alone passes');
        const [atA, atB] = [koffi.offsetof(T[name], a), koffi.offsetof(T[name], b)];
        const message = loadWith(name, copy);
        assert.ok(message.includes(`${name}.${a}: offset ${atA} in the library, ${atB} here`), message);
        assert.ok(message.includes(`${name}.${b}: offset ${atB} in the library, ${atA} here`), message);
        assert.ok(!message.includes('bytes in the library'), message);
    }
});

test('two swapped fields of an mtmd.h struct fail load(), each named', (t) => {
    if (!library().hasMtmd) {
        t.skip('the library is built without libmtmd: mtmd.h\'s structs are not checked');
        return;
    }
    const T = llamaCancel.types;
    const copy = swapped(T.mtmd_gen_out, 'n_codes', 'n_feats'); // two size_t
    assert.equal(koffi.sizeof(copy), koffi.sizeof(T.mtmd_gen_out));
    const [atCodes, atFeats] = [koffi.offsetof(T.mtmd_gen_out, 'n_codes'), koffi.offsetof(T.mtmd_gen_out, 'n_feats')];
    const message = loadWith('mtmd_gen_out', copy);
    assert.ok(message.includes(`mtmd_gen_out.n_codes: offset ${atCodes} in the library, ${atFeats} here`), message);
    assert.ok(message.includes(`mtmd_gen_out.n_feats: offset ${atFeats} in the library, ${atCodes} here`), message);
});

test('load() checks every field of every copied struct', () => {
    const lib = library();
    const layouts = require(path.join(moduleDir, 'layouts.js'));
    const real = { size: lib.c.llama_cancel_struct_size, offset: lib.c.llama_cancel_field_offset };
    const sizes = new Set(), offsets = new Set();
    lib.c.llama_cancel_struct_size = (name) => { sizes.add(name); return real.size(name); };
    lib.c.llama_cancel_field_offset = (name, field) => { offsets.add(`${name}.${field}`); return real.offset(name, field); };
    try {
        assert.deepEqual(lib.abiProblems(), []);
    } finally {
        lib.c.llama_cancel_struct_size = real.size;
        lib.c.llama_cancel_field_offset = real.offset;
    }
    const copied = { ...layouts.LAYOUTS, ...layouts.LLAMA_LAYOUTS, ...(lib.hasMtmd ? layouts.MTMD_LAYOUTS : {}) };
    assert.deepEqual([...sizes].sort(), Object.keys(copied).sort());
    const fields = Object.entries(copied).flatMap(([name, f]) => f.map(([field]) => `${name}.${field}`));
    assert.deepEqual([...offsets].sort(), fields.sort());
    assert.ok(offsets.has('llama_context_params.cb_eval'));
    for (const name of Object.keys(layouts.MTMD_LAYOUTS)) {
        assert.deepEqual(Object.keys(llamaCancel.types[name].members), layouts.MTMD_LAYOUTS[name].map(([f]) => f));
    }
});

test('a library of another MAJOR, or an older MINOR, is refused', () => {
    const lib = library();
    const [major, minor] = llamaCancel.VERSION;
    const real = lib.c.llama_cancel_version;
    const verdict = (v) => {
        lib.c.llama_cancel_version = () => v;
        try {
            return lib.abiProblems().filter((p) => p.startsWith('library version')).length === 0;
        } finally {
            lib.c.llama_cancel_version = real;
        }
    };
    assert.equal(verdict(major * 10000 + minor * 100), true);
    assert.equal(verdict(major * 10000 + (minor + 1) * 100 + 3), true, 'a newer MINOR is accepted');
    assert.equal(verdict((major + 1) * 10000), false);
    assert.equal(verdict((major - 1) * 10000 + 9999), false);
});

// The header's structs (`struct llama_cancel_x { ... };`) with their field names, and the functions
// it declares with LLAMA_CANCEL_API (tests/api_names.py's parse).
function headerDeclarations(text) {
    const structs = {};
    for (const [, name, body] of text.matchAll(/struct (llama_cancel_\w+) \{([\s\S]*?)\};/g)) {
        const code = body.replace(/\/\/[^\n]*/g, '');
        structs[name] = [...code.matchAll(/(\w+)\s*(?:\[\d+\])?\s*;/g)].map((m) => m[1]);
    }
    const body = text.split('\n').filter((line) => !line.trimStart().startsWith('#')).join('\n');
    const functions = [...body.matchAll(/LLAMA_CANCEL_API\s+[^;(]*?\b(llama_cancel_\w+)\s*\(/g)].map((m) => m[1]);
    return { structs, functions };
}

test("the binding's REACH is the header's enum llama_cancel_reach", () => {
    const header = fs.readFileSync(env('LLAMA_CANCEL_HEADER'), 'utf8');
    const want = Object.fromEntries([...header.matchAll(/\bLLAMA_CANCEL_REACH_(\w+)\s*=\s*(\d+)/g)]
        .map((m) => [m[1], Number(m[2])]));
    assert.deepEqual(Object.keys(want), ['GRAPH', 'CPU', 'CALLS'], 'the parse');
    assert.deepEqual(llamaCancel.REACH, want);
});

test('the binding declares every struct, field and function of the header', () => {
    const lib = library();
    const { structs, functions } = headerDeclarations(fs.readFileSync(env('LLAMA_CANCEL_HEADER'), 'utf8'));
    assert.ok('llama_cancel_tts_result' in structs && functions.includes('llama_cancel_tts_generate'), 'the parse');
    const declared = {};
    for (const [name, type] of Object.entries(llamaCancel.types)) {
        if (name.startsWith('llama_cancel_')) declared[name] = Object.keys(type.members);
    }
    assert.deepEqual(declared, structs);
    assert.deepEqual(Object.keys(lib.c).sort(), [...functions].sort());
});
