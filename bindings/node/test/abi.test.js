'use strict';
// The binding's layouts match the loaded library, and a wrong one is reported, not used.
const test = require('node:test');
const assert = require('node:assert/strict');
const koffi = require('koffi');
const { library, llamaCancel } = require('./host');

test('version and every layout match the library', () => {
    const lib = library();
    const members = Object.keys(llamaCancel.types.llama_cancel_decode_result.members);
    assert.deepEqual(members.slice(0, 3), ['status', 'decode_ret', 'n_committed'], 'koffi lists the fields checked');
    assert.deepEqual(lib.version(), llamaCancel.VERSION);
    assert.deepEqual(lib.abiProblems(), []);
    assert.equal(lib.c.llama_cancel_status_str(llamaCancel.CANCELLED), 'cancelled');
});

test('a layout that differs from the library is reported', () => {
    const lib = library();
    const outdated = koffi.struct({ flag: 'void *', abort_callback: 'void *', abort_callback_data: 'void *', hook: 'void *' });
    const problems = lib.structProblems('llama_cancel_decode_params', outdated);
    assert.ok(problems.some((p) => p.includes('bytes in the library')), problems.join('; '));
    const { max_stop_ms, ...rest } = Object.fromEntries(Object.entries(llamaCancel.types.llama_cancel_decode_params.members)
        .map(([k, m]) => [k, m.type]));
    const padded = koffi.struct(rest); // the last field missing: padding keeps the size
    assert.equal(koffi.sizeof(padded), koffi.sizeof(llamaCancel.types.llama_cancel_decode_params));
    const hidden = lib.structProblems('llama_cancel_decode_params', padded);
    assert.ok(hidden.some((p) => p.includes('not declared here')), hidden.join('; '));
    assert.equal(lib.c.llama_cancel_field_name('llama_cancel_decode_result', 0), 'status');
    assert.equal(lib.c.llama_cancel_field_name('llama_cancel_decode_result', 1000), null);
    assert.equal(Number(lib.c.llama_cancel_struct_size('no_such_struct')), 0);
    assert.equal(Number(lib.c.llama_cancel_field_offset('llama_cancel_decode_params', 'nope')), -1);
});
