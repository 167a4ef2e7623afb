// One graph on clip's scheduler (an mtmd encode, a batch encode, an audio-generation process) run
// as a call of its own: the hook bound to the mtmd context, or the stateless callback, reads the
// call's bytes at its checkpoints and reports a graph it stopped, which libmtmd still returns 0 for.
#pragma once

#include "checkpoints/call.h"
#include "checkpoints/checkpoint_policy.h"
#include "checkpoints/clock.h"
#include "llama-cancel.h"

#include <algorithm>
#include <cstdint>

namespace llama_cancel {

enum class clip_outcome {
    finished,   // the graph ran to its end: *ret is libmtmd's return
    stopped,    // a checkpoint stopped it: its outputs are garbage
    wrong_hook, // a hook other than the named one ran it (and stopped it): nothing usable
};

// How a clip graph runs besides its bytes.
struct clip_call_options {
    // call::interval_share.
    double interval_share = 1.0;
    // call::hold_if_short: the graph runs with no checkpoint where it finished within its interval
    // before, and the bytes are read as it returns: set then, it counts as stopped (its outputs
    // are discarded as at a checkpoint).
    bool hold_if_short = false;
};

// Runs `fn` (returning libmtmd's int32_t) under a call holding `byte`, `seq_byte` (either may be
// NULL) and `hook` (NULL: the bound hook names itself). `reach` (enum llama_cancel_reach) is raised
// to where the graph read the bytes: GRAPH with an eval callback of ours bound to the mtmd context,
// else CALLS (clip takes no abort callback).
template <typename Fn>
clip_outcome run_clip_call(const int8_t * byte, const int8_t * seq_byte, llama_cancel_hook * hook, Fn && fn,
                           int32_t * ret, int32_t & reach, clip_call_options * options = nullptr) {
    call c;
    c.byte           = byte;
    c.seq_bytes      = {seq_byte};
    c.hook           = hook;
    c.projector      = true;
    c.interval_share = options != nullptr ? options->interval_share : 1.0;
    c.hold_if_short  = options != nullptr && options->hold_if_short;
    const bool notes_time = c.hold_if_short; // the call clears hold_if_short at its first node
    const double began = now_ms();
    {
        call_scope scope(c);
        c.begin_graph();
        *ret = fn();
        c.graph_returned(true); // clip reads its output (synchronously)
    }
    reach = std::max(reach, c.graph_reach());
    if (c.wrong_hook) {
        return clip_outcome::wrong_hook;
    }
    if (c.hold) {
        c.hold = false;
        if (c.held_stop || c.stop_requested()) {
            return clip_outcome::stopped;
        }
    }
    if (c.eval_stopped) {
        return clip_outcome::stopped;
    }
    if (c.policy != nullptr && notes_time) {
        c.policy->note_graph_ms(now_ms() - began);
    }
    return clip_outcome::finished;
}

} // namespace llama_cancel
