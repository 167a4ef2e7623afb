// One cancellable call (a llama_cancel_decode, one encode of an mtmd chunk): what the callbacks read
// while its graphs run, and what they report back to it. The function that makes the call owns the
// object and makes it this thread's current call for its duration (call_scope). ggml runs the abort
// callback and cb_eval on the thread that computes the graph, which is the thread making the call,
// so both callbacks find it there, whatever user data the host bound them with. Outside any call
// they read only their own user data.
#pragma once

#include "checkpoints/abort_reach.h"
#include "checkpoints/clock.h"
#include "llama-cancel.h"

#include <cstdint>
#include <type_traits>
#include <vector>

namespace llama_cancel {

class slice_budget;
class checkpoint_policy;

struct call {
    // Set by the caller, read by the callbacks.
    const int8_t *              byte = nullptr;     // the call's byte
    std::vector<const int8_t *> seq_bytes;          // bytes of the sequences still pending
    ggml_abort_callback         abort_callback = nullptr; // the caller's own, consulted beside the bytes
    void *                      abort_data     = nullptr;
    double                      cap_ms = 0.0;       // cap on the checkpoint interval (a budget's share); 0: none
    // Below 1: checkpoints this share of the policy's interval apart, for graphs a host runs once a
    // frame and expects to stop within the interval (GEN_CODE, tens of ms: a stop waits up to the
    // interval plus a node and the return, past the interval at 1).
    double                      interval_share = 1.0;
    slice_budget *              budget = nullptr;   // node clock of a stop-time budget; NULL: none
    // The call installed an abort callback on the context: nodes of backends that take it need no
    // eval-callback checkpoint (abort_reach.h). False for an encode (clip takes none).
    bool                        abort_installed = false;
    abort_reach                 reach;
    // The graph in flight runs to its end whatever the bytes say (no checkpoint, no stop): a step
    // cheaper to finish than to snapshot. The call looks at the bytes once it returns.
    bool                        hold = false;
    // The call runs held (hold, set at its first node that computes, which clears this) where the
    // policy that runs it saw a call that began with the same graph finish within its interval
    // (checkpoint_policy::graph_is_short): a call shorter than its interval is stopped as soon by
    // its own return. The call then reads the bytes as it returns, and tells `policy` how long it
    // took when it finished (note_graph_ms).
    bool                        hold_if_short = false;
    // The policy that places the checkpoints of the call's graphs (set at its graph's first ask).
    checkpoint_policy *         policy        = nullptr;
    // The hook the caller named (decode params' hook, an encode hook), or NULL until the hook bound
    // to the context names itself at its first ask (claim_hook): a host binds a hook once.
    llama_cancel_hook *         hook = nullptr;
    // A graph on clip's scheduler (run_clip_call): the stateless callback keeps a policy for these
    // apart from the text contexts' (stateless_policy_of).
    bool                        projector = false;

    // Written by the callbacks during one graph; begin_graph() clears them.
    bool     eval_stopped    = false; // an eval callback stopped the graph (llama_decode still returns 0)
    bool     held_stop       = false; // a chained cb_eval asked to stop a held graph
    double   longest_view_ms = 0.0;   // longest compute between two checkpoints on a device
    uint64_t device_asks     = 0;     // asks about device nodes so far (never cleared: a clock)
    bool     rpc_asked       = false; // an ask about a node in an RPC server's memory
    // A graph began since a hook last looked: the hook's stop state starts clean there.
    bool     graph_fresh     = false;
    // A graph began that the checkpoint policy was not told of yet (checkpoint_policy::begin_graph):
    // wherever llama.cpp built it, its first ask opens it.
    bool     graph_untold    = false;
    // A hook other than `hook` ran the call's graph (the caller named the wrong one): it stops
    // every node and the call fails.
    bool     wrong_hook      = false;
    // A llama-cancel eval callback was asked about a node of the graph; the abort callback ran in it.
    bool     eval_seen       = false;
    bool     abort_seen      = false;
    // When the call began (now_ms), or the run it is part of (run_scope): a view on an emulated
    // device may last a tenth of what ran since (checkpoint_policy::begin_graph).
    double   began_ms        = 0.0;

    // The call's byte or a pending sequence's is set (never while the call holds its graph).
    bool stop_requested() const;
    // The graph llama.cpp or clip ran for the call returned, synchronized: its policy learns when it
    // ended (a graph's last view has no checkpoint; outside calls its end is seen only as the next
    // begins). `outputs_read`: the call copied outputs out; where it did not, an RPC server may still
    // be computing (ggml-rpc's synchronize does not wait, work.h), and the end is not known.
    void graph_returned(bool outputs_read);
    // Where the graph that returned read the bytes (enum llama_cancel_reach).
    int32_t graph_reach() const {
        return eval_seen ? LLAMA_CANCEL_REACH_GRAPH : abort_seen ? LLAMA_CANCEL_REACH_CPU : LLAMA_CANCEL_REACH_CALLS;
    }
    void begin_graph() {
        eval_seen       = false;
        abort_seen      = false;
        eval_stopped    = false;
        held_stop       = false;
        longest_view_ms = 0.0;
        rpc_asked       = false;
        graph_fresh     = true;
        graph_untold    = true;
    }
};

// This thread's current call, or NULL.
call * current_call();

// Which of the stateless callback's two per-thread in-call policies a graph of call `c` uses: the
// projector one for a clip call, else the text one (NULL too; the callback itself takes graphs
// outside any call to buffer_policies.h's policy of their compute buffer). One policy for both
// learnt one rate and one graph size from a projector's graphs and a text context's on one device,
// and stopped late (on llvmpipe: 25 ms against 9.5 on a 90 ms code-predictor call).
template <typename Policy> Policy & stateless_policy_of(const call * c, Policy & text, Policy & projector) {
    return c != nullptr && c->projector ? projector : text;
}

// At an ask of call `c` (NULL: none): tells `policy` once that the call's graph begins
// (checkpoint_policy::begin_graph), wherever llama.cpp or clip built it.
template <typename Policy> void tell_graph_begin(call * c, Policy & policy) {
    if (c != nullptr && c->graph_untold) {
        c->graph_untold = false;
        if constexpr (std::is_same_v<Policy, checkpoint_policy>) {
            c->policy = &policy; // (tests tell fakes)
        }
        policy.begin_graph(now_ms() - c->began_ms);
    }
}

// Makes `c` the thread's current call until destroyed, then puts the previous one back (an mtmd
// chunk's call holds the decodes' calls inside it).
class call_scope {
  public:
    explicit call_scope(call & c);
    ~call_scope();
    call_scope(const call_scope &) = delete;
    call_scope & operator=(const call_scope &) = delete;

  private:
    call * previous_;
};

// Makes the calls this thread begins until destroyed part of one run (an mtmd evaluation: its
// chunks' encodes and decodes), timed from the run's start; an inner run_scope joins the outer one.
class run_scope {
  public:
    run_scope();
    ~run_scope();
    run_scope(const run_scope &) = delete;
    run_scope & operator=(const run_scope &) = delete;

  private:
    double previous_;
};

// ggml_abort_callback with the call as user data: the node clock of a budget, the bytes, the
// caller's own callback.
bool call_abort_callback(void * c);

} // namespace llama_cancel
