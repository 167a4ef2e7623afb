'use strict';
// The binding's layouts match the loaded library, and a wrong one is reported, not used.
const test = require('node:test');
const assert = require('node:assert/strict');
const koffi = require('koffi');
const { library, llamaCancel } = require('./host');

test('version and every layout match the library', () => {
    const lib = library();
    assert.deepEqual(lib.version(), llamaCancel.VERSION);
    assert.deepEqual(lib.abiProblems(), []);
    assert.equal(lib.c.llama_cancel_status_str(llamaCancel.CANCELLED), 'cancelled');
});

test('a layout that differs from the library is reported', () => {
    const lib = library();
    const outdated = koffi.struct({ flag: 'void *', abort_callback: 'void *', abort_callback_data: 'void *', hook: 'void *' });
    const problems = lib.structProblems('llama_cancel_decode_params', outdated);
    assert.ok(problems.some((p) => p.includes('bytes in the library')), problems.join('; '));
    assert.equal(Number(lib.c.llama_cancel_struct_size('no_such_struct')), 0);
    assert.equal(Number(lib.c.llama_cancel_field_offset('llama_cancel_decode_params', 'nope')), -1);
});
