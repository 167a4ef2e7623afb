'use strict';
// What the binding's tests share: the library, the native test probe (tests/ffi_probe.c) and the
// cross-thread cancel. Paths come from the environment CTest sets: LLAMA_CANCEL_LIBRARY,
// LLAMA_CANCEL_PROBE, LLAMA_CANCEL_TINY_MODEL, LLAMA_CANCEL_BENCH_MODEL.
const assert = require('node:assert/strict');
const path = require('node:path');
const koffi = require('koffi');
// The binding under test: the packed copy tests/node_binding.sh unpacks, else this source tree.
const moduleDir = path.dirname(require.resolve(process.env.LLAMA_CANCEL_NODE_MODULE || '..'));
const llamaCancel = require(moduleDir);

const WAIT_MS = 20000; // every wait on the worker is bounded; past it the test fails and says why

function env(name) {
    const v = process.env[name];
    if (!v) throw new Error(`${name} is not set (run through CTest)`);
    return v;
}

let lib = null;
function library() {
    if (!lib) {
        lib = llamaCancel.load(env('LLAMA_CANCEL_LIBRARY'));
        lib.loadBackends();
    }
    return lib;
}

// The host probe: a native callback that holds the graph (or the token loop) at call `holdAt`
// until the byte is set, so that a store from the main thread lands inside the call every time.
// A JavaScript callback cannot play this part: it would have to run on koffi's worker thread.
class Probe {
    constructor(byte) {
        this.so = koffi.load(env('LLAMA_CANCEL_PROBE'));
        const P = 'void *';
        this.fn = {};
        for (const [name, ret, args] of [
            ['host_probe_new', P, [P]], ['host_probe_free', 'void', [P]], ['host_probe_arm', 'void', [P, 'int32_t']],
            ['host_probe_wait_started', 'int32_t', [P, 'int32_t']], ['host_probe_calls', 'int32_t', [P]],
            ['host_probe_timed_out', 'int32_t', [P]], ['host_probe_decode_tid', 'int64_t', [P]],
            ['host_probe_off_thread', 'int64_t', [P]], ['host_probe_gettid', 'int64_t', []]]) {
            this.fn[name] = this.so.func(name, ret, args);
        }
        this.ptr = this.fn.host_probe_new(byte.ptr);
        this.abortCallback = this.so.symbol('host_probe_abort_callback');
        this.evalCallback = this.so.symbol('host_probe_eval_callback');
        this.onToken = this.so.symbol('host_probe_on_token');
    }
    arm(holdAt) { this.fn.host_probe_arm(this.ptr, holdAt); }
    calls() { return this.fn.host_probe_calls(this.ptr); }
    free() { this.fn.host_probe_free(this.ptr); }
}

// Every await on a worker is bounded: past `ms` the test fails and says what it waited for.
function withTimeout(promise, ms, what) {
    let timer;
    const timeout = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
    });
    return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// Starts `start()` (an async call: it runs on a koffi worker thread), waits until the probe holds
// it inside the computation, stores the byte from this (the main) thread, and awaits the result.
// Returns { value, ms } with ms from the store to the result. waitMs bounds both waits.
async function cancelFromMain(probe, byte, holdAt, start, waitMs = WAIT_MS) {
    byte.clear();
    probe.arm(holdAt);
    let returned = 0n;
    const pending = start().then((v) => { returned = process.hrtime.bigint(); return v; });
    const started = probe.fn.host_probe_wait_started(probe.ptr, waitMs); // blocks this thread, bounded
    const stored = process.hrtime.bigint();
    byte.set(); // the cancel: one byte store, from the main thread
    const value = await withTimeout(pending, waitMs, 'the worker after the store');
    assert.ok(started, `the worker never reached call ${holdAt} (of ${probe.calls()})`);
    assert.equal(probe.fn.host_probe_timed_out(probe.ptr), 0, 'the probe saw the store');
    const worker = probe.fn.host_probe_decode_tid(probe.ptr);
    assert.notEqual(worker, probe.fn.host_probe_gettid(), 'the call ran on a worker, not the main thread');
    assert.equal(Number(probe.fn.host_probe_off_thread(probe.ptr)), 0, 'no callback ran off the worker');
    byte.clear();
    return { value, ms: Number(returned - stored) / 1e6 };
}

// An asynchronous call awaited at most WAIT_MS.
function bounded(promise, what) {
    return withTimeout(promise, WAIT_MS, what);
}

function tokens(n, vocab = 200, seed = 7919) {
    return Array.from({ length: n }, (_, i) => 3 + ((i * seed) % vocab));
}

module.exports = { env, library, Probe, cancelFromMain, bounded, tokens, llamaCancel, moduleDir, WAIT_MS };
