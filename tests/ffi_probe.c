/* Test-only shim for tests/ffi_host.py: wraps the exported reader to record which thread calls it.
 * A Python callback cannot play this part: like a Dart isolate callback, it would need the
 * interpreter on ggml's thread. Everything else in the host test uses llama-cancel by name. */
#define _GNU_SOURCE
#include "llama-cancel.h"

#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

struct ffi_probe {
    const int8_t * byte;
    int64_t        owner_tid;   /* native id of the thread that calls llama_decode */
    int64_t        calls;
    int64_t        off_thread;
    int32_t        started;     /* set once call number `hold_at` is reached */
    int32_t        hold_at;     /* > 0: that call waits until the byte is set (at most 20 s) */
};

bool ffi_probe_abort_callback(void * data) {
    struct ffi_probe * p = (struct ffi_probe *) data;
    p->calls++;
    if ((int64_t) syscall(SYS_gettid) != p->owner_tid) {
        p->off_thread++;
    }
    if (p->hold_at > 0 && p->calls == p->hold_at) {
        __atomic_store_n(&p->started, 1, __ATOMIC_SEQ_CST);
        for (long i = 0; i < 20000 && !llama_cancel_abort_callback((void *) p->byte); ++i) {
            usleep(1000);
        }
    }
    return llama_cancel_abort_callback((void *) p->byte);
}

/* The host probe: what the Python and Node binding tests install to make a cross-thread store land
 * inside a decode deterministically. Function-only API (no struct layout for a host to copy). As the
 * decode's abort callback, the hook's chained eval callback or the token loop's on_token, call
 * number `hold_at` waits until the host's byte is set (at most 20 s), then lets the library see the
 * byte as it would any other store. It never stops a graph itself. */
#include <stdlib.h>
#include <time.h>

struct host_probe {
    const int8_t * byte;
    int32_t        hold_at;    /* call that waits for the byte; 0: none (counting only) */
    int32_t        calls;      /* callback calls (asks, for the eval callback) since armed */
    int32_t        started;    /* set once call hold_at waits: the graph is running */
    int32_t        timed_out;  /* the byte never came */
    int64_t        decode_tid; /* thread of the first call since armed */
    int64_t        off_thread; /* calls on another thread */
};

static int64_t host_probe_tid(void) {
    return (int64_t) syscall(SYS_gettid);
}

struct host_probe * host_probe_new(const int8_t * byte) {
    struct host_probe * p = calloc(1, sizeof(*p));
    if (p != NULL) {
        p->byte = byte;
    }
    return p;
}

void host_probe_free(struct host_probe * p) {
    free(p);
}

/* Resets the counters; the next run holds at call `hold_at` (0: never). */
void host_probe_arm(struct host_probe * p, int32_t hold_at) {
    p->hold_at    = hold_at;
    p->calls      = 0;
    p->timed_out  = 0;
    p->decode_tid = 0;
    p->off_thread = 0;
    __atomic_store_n(&p->started, 0, __ATOMIC_SEQ_CST);
}

/* Counts a call and, at call hold_at, waits for the byte. */
static void host_probe_call(struct host_probe * p) {
    const int64_t tid = host_probe_tid();
    if (p->decode_tid == 0) {
        p->decode_tid = tid;
    } else if (tid != p->decode_tid) {
        p->off_thread++;
    }
    if (++p->calls != p->hold_at) {
        return;
    }
    __atomic_store_n(&p->started, 1, __ATOMIC_SEQ_CST);
    const struct timespec step = {0, 20000}; /* 20 us: the store is seen within that */
    for (long i = 0; i < 1000000 && !llama_cancel_abort_callback((void *) p->byte); ++i) {
        nanosleep(&step, NULL);
    }
    p->timed_out = !llama_cancel_abort_callback((void *) p->byte);
}

/* For llama_cancel_decode_params.abort_callback (consulted beside the byte). */
bool host_probe_abort_callback(void * data) {
    host_probe_call((struct host_probe *) data);
    return false;
}

/* For llama_cancel_hook_params.chain: asks for node hold_at and waits once it is computed. */
bool host_probe_eval_callback(struct ggml_tensor * t, bool ask, void * data) {
    struct host_probe * p = (struct host_probe *) data;
    (void) t;
    if (ask) {
        host_probe_call(p);
        return p->calls == p->hold_at;
    }
    return true;
}

/* For llama_cancel_generate_params.on_token: token number hold_at waits. */
bool host_probe_on_token(llama_token token, void * data) {
    (void) token;
    host_probe_call((struct host_probe *) data);
    return true;
}

/* Blocks the host's thread until call hold_at waits for the byte: 1, or 0 after timeout_ms. */
int32_t host_probe_wait_started(struct host_probe * p, int32_t timeout_ms) {
    const struct timespec step = {0, 50000};
    for (long i = 0; i < (long) timeout_ms * 20; ++i) {
        if (__atomic_load_n(&p->started, __ATOMIC_SEQ_CST)) {
            return 1;
        }
        nanosleep(&step, NULL);
    }
    return __atomic_load_n(&p->started, __ATOMIC_SEQ_CST);
}

int32_t host_probe_calls(const struct host_probe * p) { return p->calls; }
int32_t host_probe_timed_out(const struct host_probe * p) { return p->timed_out; }
int64_t host_probe_decode_tid(const struct host_probe * p) { return p->decode_tid; }
int64_t host_probe_off_thread(const struct host_probe * p) { return p->off_thread; }
/* Native id of the calling thread, to tell the host's thread from the decoding one. */
int64_t host_probe_gettid(void) { return host_probe_tid(); }
