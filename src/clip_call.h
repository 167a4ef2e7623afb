// One graph on clip's scheduler (an mtmd encode, a batch encode, an audio-generation process) run
// as a call of its own: the hook bound to the mtmd context, or the stateless callback, reads the
// call's bytes at its checkpoints and reports a graph it stopped, which libmtmd still returns 0 for.
#pragma once

#include "call.h"
#include "llama-cancel.h"

#include <cstdint>

namespace llama_cancel {

enum class clip_outcome {
    finished,   // the graph ran to its end: *ret is libmtmd's return
    stopped,    // a checkpoint stopped it: its outputs are garbage
    wrong_hook, // a hook other than the named one ran it (and stopped it): nothing usable
};

// Runs `fn` (returning libmtmd's int32_t) under a call holding `flag`, `seq_flag` (either may be
// NULL) and `hook` (NULL: the bound hook names itself); `interval_share`: call::interval_share.
template <typename Fn>
clip_outcome run_clip_call(const int8_t * flag, const int8_t * seq_flag, llama_cancel_hook * hook, Fn && fn,
                           int32_t * ret, double interval_share = 1.0) {
    call c;
    c.flag           = flag;
    c.seq_flags      = {seq_flag};
    c.hook           = hook;
    c.projector      = true;
    c.interval_share = interval_share;
    {
        call_scope scope(c);
        c.begin_graph();
        *ret = fn();
    }
    if (c.wrong_hook) {
        return clip_outcome::wrong_hook;
    }
    return c.eval_stopped ? clip_outcome::stopped : clip_outcome::finished;
}

} // namespace llama_cancel
