// Ways the tests and the benchmarks stop a graph where they mean to: a hook with a chained eval
// callback, a trigger that stores the byte at a chosen node or abort-callback call, and a probe
// around the stateless callback that counts its checkpoints and stores at a chosen ask; and a timer
// of single nodes (what no checkpoint can split). Not part of the library's API.
#pragma once

#include "llama-cancel.h"
#include "llama.h"

#include <cstdint>
#include <memory>
#include <string>

namespace common {

struct hook_deleter { void operator()(llama_cancel_hook * h) const { llama_cancel_hook_free(h); } };
using hook_ptr = std::unique_ptr<llama_cancel_hook, hook_deleter>;

// A hook with `chain` (may be NULL) as its chained eval callback and an interval of `interval_ms`
// (<= 0: the default).
hook_ptr make_hook(ggml_backend_sched_eval_callback chain = nullptr, void * chain_data = nullptr,
                   double interval_ms = 0.0);

// Stores 1 into `byte` at a chosen graph node, so that tests stop a graph where they mean to:
// as an eval callback (a hook's chain) it asks for node number `at` and stores the byte once that
// node is computed; as an abort callback it stores at call number `at`. Counts calls either way.
struct node_trigger {
    int      calls = 0;
    int      at    = -1;
    int8_t * byte  = nullptr;
    static bool eval_cb(ggml_tensor * t, bool ask, void * data);
    static bool abort_cb(void * data);
};

// Longest single graph node: as an eval callback it asks for every node, so the scheduler computes
// one node at a time and the time between ask and answer is that node's compute time.
struct node_timer {
    double      t_ask   = 0.0;
    double      longest = 0.0; // ms
    int         n_nodes = 0;
    std::string longest_op;
    static bool callback(ggml_tensor * t, bool ask, void * data);

    // The bound checkpoints can keep (issue 31): a stop waits at most the hook's interval, then the
    // longest node in flight, then the call's return (k_return_ms).
    static constexpr double k_return_ms = 2.0;
    static double bound_ms(double longest_ms) {
        return LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS + longest_ms + k_return_ms;
    }
};

// The stateless callback as a host binds it (cb_eval = llama_cancel_eval_callback, user data = the
// byte), observed from outside by the tests and the benchmark: set cb_eval to eval_cb and its user
// data to the probe; every call goes through unchanged with the probe's byte. It counts asks and
// the checkpoints the callback passes, notes the largest node's work, and, for the tests, stores the
// byte at ask number `store_at` as a store from another thread during that node's compute lands:
// once the scheduler has grouped the node's view, which only a checkpoint ending that view can see.
// The view ends at the first node answered true; when the split ends first (the next node asked
// lives in another buffer type), the view was computed with no checkpoint and the store comes late,
// at that next node. With `while_grouping`, it stores before ask `store_at` instead: the check made
// while grouping sees it.
struct stateless_probe {
    int8_t byte           = 0;
    int    asks           = 0;
    int    checkpoints    = 0;     // passed, the byte at 0
    double max_work       = 0.0;   // estimated FLOPs of the largest node asked about, where
    bool   measure_work   = false; // set (tests: a node estimate at each ask, which a bench's
                                   // overhead must not carry)
    int    store_at       = -1;
    bool   while_grouping = false;
    int    stored_at      = -1;    // ask number when the byte was stored
    bool   stored_late    = false; // the view of store_at ended with no checkpoint: stored after it
    int    stopped_at     = -1;    // ask number of the checkpoint that returned false (-1: none)

    static bool eval_cb(ggml_tensor * t, bool ask, void * data);
    // Counters, store and byte back to zero (measure_work stays); the byte is stored at ask `at`
    // (-1: never).
    void rearm(int at);

  private:
    bool        pending_    = false;   // node store_at asked, its view not closed yet
    const void * store_buft_ = nullptr; // where node store_at lives
    void store(bool late);
};

} // namespace common
