/* Test-only shim for tests/ffi_host.py: wraps the exported reader to record which thread calls it.
 * A Python callback cannot play this part: like a Dart isolate callback, it would need the
 * interpreter on ggml's thread. Everything else in the host test uses llama-cancel by name. */
#define _GNU_SOURCE
#include "llama-cancel.h"

#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

struct ffi_probe {
    const int8_t * flag;
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
        for (long i = 0; i < 20000 && !llama_cancel_abort_callback((void *) p->flag); ++i) {
            usleep(1000);
        }
    }
    return llama_cancel_abort_callback((void *) p->flag);
}
