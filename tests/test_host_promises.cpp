// What the header promises a host, case by case, through the exported API on the CPU (issue 30):
// the host's own abort callback survives our calls, a hook's stop belongs to its graph, the hook
// bound to a context is found (a wrong one is an error), a negative index after a stop reads
// nothing, per-sequence bytes leave outputs readable by batch index, and the token loop's checks
// come before any work. (A context turned to embeddings by llama_set_embeddings is not tried here:
// llama.cpp 0.7.0 crashes in the next llama_decode of such a context, plain or ours.)
// One model per process (LLAMA_CANCEL_MODEL): the tiny llama model and a recurrent one.
#include "fixtures.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace {

using fixtures::node_trigger;
using fixtures::pos_max;
using fixtures::suite_model;

constexpr int k_n = 128; // batch tokens
constexpr int k_u = 32;  // n_ubatch: four slices

class Promises : public fixtures::model_suite<Promises> {
  public:
    static constexpr const char * model_env  = "LLAMA_CANCEL_MODEL";
    static constexpr const char * model_what = "a tiny model of scripts/make_model.py";
};

common::context_options options(uint32_t n_seq_max = 1) {
    return fixtures::context_options(k_n, k_u, n_seq_max);
}

bool recurrent() {
    return llama_model_is_recurrent(suite_model()) || llama_model_is_hybrid(suite_model());
}

// Counts the calls of a host's own abort callback; never stops.
struct host_counter {
    int         calls = 0;
    static bool cb(void * data) {
        ++static_cast<host_counter *>(data)->calls;
        return false;
    }
};

std::vector<float> row(const float * p) {
    const int32_t n = llama_vocab_n_tokens(llama_model_get_vocab(suite_model()));
    return p != nullptr ? std::vector<float>(p, p + n) : std::vector<float>();
}

} // namespace

// Set in the context params at creation and handed over with llama_cancel_hook_bind: consulted
// during our decode and installed again after it, so a plain llama_decode still calls it.
TEST_F(Promises, HostAbortCallbackFromContextParamsSurvivesOurDecode) {
    host_counter host;
    common::context_options o = options();
    o.abort_callback      = host_counter::cb;
    o.abort_callback_data = &host;
    common::hook_ptr hook = fixtures::make_hook(nullptr);
    auto ctx = fixtures::make_bound_context(suite_model(), hook.get(), o);
    auto prompt = common::make_prompt(suite_model(), 64);
    int8_t byte = 0;
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.byte = &byte; // no hook named, no abort callback passed: the hook's are found
    common::seq_batch a(prompt, 0, 32, 0);
    ASSERT_EQ(llama_cancel_decode(ctx.get(), a.get(), &p, nullptr, nullptr), LLAMA_CANCEL_OK);
    EXPECT_GT(host.calls, 0) << "the host's callback is consulted during our decode";
    const int during = host.calls;
    common::seq_batch b(prompt, 32, 32, 32);
    ASSERT_EQ(llama_decode(ctx.get(), b.get()), 0);
    EXPECT_GT(host.calls, during) << "the host's callback is installed again after our decode";
}

// A hook's stop is its graph's: after one stop, a call with params.hook NULL and the byte at 0
// decodes cleanly, and so does a host's own llama_decode outside our calls.
// The header's first promise: a call's byte is read only while that call runs. After it returned, a
// graph the host runs itself with the same hook (and the same byte now set) is not stopped by it;
// the hook's own byte (hook_params.byte, set_flag) is the one read outside calls.
TEST_F(Promises, ACallsByteIsNotReadAfterTheCallReturned) {
    auto h      = fixtures::make_hooked(suite_model(), k_n, k_u, nullptr);
    auto prompt = common::make_prompt(suite_model(), 64, 3);
    int8_t call_byte = 0;
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.byte = &call_byte;
    common::seq_batch a(prompt, 0, 32, 0);
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_decode(h.ctx.get(), a.get(), &p, &r, nullptr), LLAMA_CANCEL_OK) << r.message;
    call_byte = 1; // set after the call: no graph of the host's own may see it
    common::seq_batch b(prompt, 32, 32, 32);
    ASSERT_EQ(llama_decode(h.ctx.get(), b.get()), 0);
    EXPECT_FALSE(llama_cancel_hook_stopped(h.hook.get())) << "the call's byte was read after the call";
    auto ref = fixtures::make_bound_context(suite_model(), nullptr, options());
    common::seq_batch all(prompt, 0, 64, 0);
    ASSERT_EQ(llama_decode(ref.get(), all.get()), 0);
    EXPECT_EQ(row(llama_get_logits_ith(h.ctx.get(), -1)), row(llama_get_logits_ith(ref.get(), -1)))
        << "the host's graph computed in full";
}

TEST_F(Promises, HookStopDoesNotStickToLaterGraphs) {
    int8_t byte = 0;
    node_trigger trig;
    trig.byte = &byte;
    trig.at   = 5;
    auto h = fixtures::make_hooked(suite_model(), k_n, k_u, &trig);
    auto prompt = common::make_prompt(suite_model(), 96, 3);
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.byte = &byte;
    common::seq_batch a(prompt, 0, 32, 0);
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_decode(h.ctx.get(), a.get(), &p, &r, nullptr), LLAMA_CANCEL_CANCELLED);
    EXPECT_TRUE(llama_cancel_hook_stopped(h.hook.get())) << "true for the graph it stopped";
    byte    = 0;
    trig.at = -1;
    ASSERT_EQ(llama_cancel_decode(h.ctx.get(), a.get(), &p, &r, nullptr), LLAMA_CANCEL_OK) << r.message;
    EXPECT_FALSE(llama_cancel_hook_stopped(h.hook.get()));
    EXPECT_EQ(pos_max(h.ctx.get()), 31);

    // Outside our calls: a graph the hook stopped through its own byte, then a clean one.
    int8_t own = 0;
    llama_cancel_hook_set_byte(h.hook.get(), &own);
    trig.byte = &own;
    trig.at   = trig.calls + 5;
    common::seq_batch b(prompt, 32, 32, 32);
    EXPECT_EQ(llama_decode(h.ctx.get(), b.get()), 0) << "llama.cpp reports an eval-callback stop as success";
    EXPECT_TRUE(llama_cancel_hook_stopped(h.hook.get())) << "the host learns the graph is garbage";
    llama_memory_seq_rm(llama_get_memory(h.ctx.get()), 0, -1, -1); // the garbage goes (recurrent state too)
    own     = 0;
    trig.at = -1;
    common::seq_batch all(prompt, 0, 64, 0);
    EXPECT_EQ(llama_decode(h.ctx.get(), all.get()), 0);
    EXPECT_FALSE(llama_cancel_hook_stopped(h.hook.get())) << "the next graph is not stopped";
    auto ref = fixtures::make_bound_context(suite_model(), nullptr, options());
    ASSERT_EQ(llama_decode(ref.get(), all.get()), 0);
    EXPECT_EQ(row(llama_get_logits_ith(h.ctx.get(), -1)), row(llama_get_logits_ith(ref.get(), -1)))
        << "the graph after the stop computed in full";
}

// A hook passed in params that is not the one bound to the context is a clear error, and memory
// stays as it was.
TEST_F(Promises, WrongHookIsAClearErrorAndLosesNothing) {
    auto h = fixtures::make_hooked(suite_model(), k_n, k_u);
    common::hook_ptr other = fixtures::make_hook(nullptr);
    auto prompt = common::make_prompt(suite_model(), 64, 4);
    common::seq_batch a(prompt, 0, 32, 0);
    ASSERT_EQ(llama_cancel_decode(h.ctx.get(), a.get(), nullptr, nullptr, nullptr), LLAMA_CANCEL_OK);
    const auto before = fixtures::seq_state(h.ctx.get(), 0);
    int8_t byte = 0;
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.byte = &byte;
    p.hook = other.get();
    llama_cancel_decode_result r;
    common::seq_batch b(prompt, 32, 32, 32);
    ASSERT_EQ(llama_cancel_decode(h.ctx.get(), b.get(), &p, &r, nullptr), LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::strstr(r.message, "not the hook bound"), nullptr) << r.message;
    EXPECT_EQ(pos_max(h.ctx.get()), 31);
    EXPECT_EQ(fixtures::seq_state(h.ctx.get(), 0), before);
}

// After CANCELLED no output exists, by batch index or by negative index.
TEST_F(Promises, NegativeIndexAfterAStopReadsNothing) {
    int8_t byte = 0;
    node_trigger trig;
    trig.byte = &byte;
    trig.at   = 5;
    auto h = fixtures::make_hooked(suite_model(), k_n, k_n, &trig); // one ubatch: one llama_decode call
    auto prompt = common::make_prompt(suite_model(), 64, 5);
    common::seq_batch a(prompt, 0, 64, 0);
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.byte = &byte;
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_decode(h.ctx.get(), a.get(), &p, &r, nullptr), LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.n_decode_calls, 1);
    EXPECT_EQ(llama_cancel_get_logits_ith(h.ctx.get(), &r, -1), nullptr);
    EXPECT_EQ(llama_cancel_get_logits_ith(h.ctx.get(), &r, 63), nullptr);
    EXPECT_EQ(llama_cancel_get_embeddings_ith(h.ctx.get(), &r, -1), nullptr);
}

// Per-sequence bytes, none set, two sequences with two outputs each, batch larger than n_ubatch on a
// hooked context: OK, and every output asked for is readable by batch index and equals a plain decode's.
TEST_F(Promises, PerSequenceBytesKeepOutputsReadableByBatchIndex) {
    auto h = fixtures::make_hooked(suite_model(), k_n, k_u, nullptr, 2);
    auto ref = fixtures::make_bound_context(suite_model(), nullptr, options(2));
    const auto p0 = common::make_prompt(suite_model(), 64, 6);
    const auto p1 = common::make_prompt(suite_model(), 64, 7);
    common::multi_seq_batch b({p0, p1}, 64);
    const int outs[] = {40, 63, 100, 127};
    for (int i : outs) {
        b.get().logits[i] = 1;
    }
    int8_t b0 = 0, b1 = 0;
    const int8_t * flags[2] = {&b0, &b1};
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.hook      = h.hook.get(); // named, as 1.1's hosts did (1.1 then moved the outputs last)
    p.seq_bytes = flags;
    p.n_seq     = 2;
    llama_cancel_decode_result r;
    llama_cancel_seq_result seqs[2];
    ASSERT_EQ(llama_cancel_decode(h.ctx.get(), b.get(), &p, &r, seqs), LLAMA_CANCEL_OK) << r.message;
    ASSERT_GE(r.output_base, 0) << "nothing was dropped";
    ASSERT_EQ(llama_decode(ref.get(), b.get()), 0);
    for (int i : outs) {
        const auto got = row(llama_cancel_get_logits_ith(h.ctx.get(), &r, i));
        ASSERT_FALSE(got.empty()) << "output " << i;
        EXPECT_EQ(got, row(llama_get_logits_ith(ref.get(), i))) << "output " << i;
    }
}

// A chained cb_eval that asks for a stop during a generation step the library holds (recurrent
// state: the step runs to its end) leaves the whole one-token batch committed: that is OK, not a
// CANCELLED that would leave nothing to resume.
// (Registered for recurrent and hybrid models only, tests/CMakeLists.txt.)
TEST_F(Promises, ChainedStopInAHeldStepThatCommittedIsOk) {
    ASSERT_TRUE(recurrent()) << "tests/CMakeLists.txt runs this on recurrent and hybrid models";
    struct stop_chain {
        int         at    = 3;
        int         calls = 0;
        static bool cb(ggml_tensor *, bool ask, void * data) {
            auto * c = static_cast<stop_chain *>(data);
            return ask ? ++c->calls == c->at : false; // asks for node `at`, then asks to stop there
        }
    } chain;
    llama_cancel_hook_params hp = llama_cancel_hook_default_params();
    hp.chain      = stop_chain::cb;
    hp.chain_data = &chain;
    common::hook_ptr hook(llama_cancel_hook_init(&hp));
    auto ctx = fixtures::make_bound_context(suite_model(), hook.get(), options());
    auto prompt = common::make_prompt(suite_model(), 9, 10);
    chain.at = -1;
    ASSERT_EQ(llama_cancel_decode(ctx.get(), llama_batch_get_one(prompt.data(), 8), nullptr, nullptr, nullptr),
              LLAMA_CANCEL_OK);
    chain.at    = chain.calls + 3;
    int8_t byte = 0;
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.byte = &byte;
    llama_cancel_decode_result r;
    common::seq_batch step(prompt, 8, 1, 8);
    EXPECT_EQ(llama_cancel_decode(ctx.get(), step.get(), &p, &r, nullptr), LLAMA_CANCEL_OK) << r.message;
    ASSERT_GE(chain.calls, chain.at) << "the chain asked for its stop";
    EXPECT_EQ(r.n_committed, 1) << "the held step ran to its end";
    EXPECT_EQ(pos_max(ctx.get()), 8);
}

// Arguments the token loop would refuse are refused before anything is decoded, and n_past names the
// sequence's next position after an ERROR too.
TEST_F(Promises, TokenLoopChecksComeFirstAndNPastStaysTrue) {
    auto ctx = fixtures::make_bound_context(suite_model(), nullptr, options());
    auto prompt = common::make_prompt(suite_model(), 16, 9);
    ASSERT_EQ(llama_cancel_decode(ctx.get(), llama_batch_get_one(prompt.data(), 8), nullptr, nullptr, nullptr),
              LLAMA_CANCEL_OK);
    llama_cancel_generate_params gp = llama_cancel_generate_default_params();
    gp.n_predict = 4;
    llama_token out[4];
    llama_cancel_generate_result r;
    EXPECT_EQ(llama_cancel_generate(ctx.get(), prompt.data() + 8, 8, &gp, out, 2, &r), LLAMA_CANCEL_ERROR);
    EXPECT_EQ(r.n_past, 8) << r.message;
    gp.n_batch = k_n + 1;
    EXPECT_EQ(llama_cancel_generate(ctx.get(), prompt.data() + 8, 8, &gp, out, 4, &r), LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::strstr(r.message, "n_batch"), nullptr) << r.message;
    EXPECT_EQ(r.n_past, 8);
    EXPECT_EQ(pos_max(ctx.get()), 7) << "nothing was decoded";
}

// llama_cancel_hook_bind refuses, with nothing changed in the params or the hook: NULL arguments, a
// cb_eval already set, and a hook already bound into other params (one hook per context: a second
// bind would note another context's abort callback and install it on the first). Params that carry
// the hook already are bound: true, nothing changed.
TEST_F(Promises, HookBindRefusesWithNothingChanged) {
    common::hook_ptr hook = fixtures::make_hook(nullptr);
    llama_context_params clean = llama_context_default_params();
    EXPECT_FALSE(llama_cancel_hook_bind(nullptr, &clean));
    EXPECT_FALSE(llama_cancel_hook_bind(hook.get(), nullptr));

    auto same = [](const llama_context_params & a, const llama_context_params & b) {
        return std::memcmp(&a, &b, sizeof(a)) == 0;
    };
    llama_context_params taken = llama_context_default_params();
    taken.cb_eval              = fixtures::node_trigger::eval_cb;
    const llama_context_params taken_before = taken;
    EXPECT_FALSE(llama_cancel_hook_bind(hook.get(), &taken)) << "a cb_eval already set: chain it through the hook";
    EXPECT_TRUE(same(taken, taken_before)) << "refused params are left as they were";

    host_counter first, second;
    llama_context_params a = llama_context_default_params();
    a.abort_callback       = host_counter::cb;
    a.abort_callback_data  = &first;
    ASSERT_TRUE(llama_cancel_hook_bind(hook.get(), &a)) << "the refusals above left the hook unbound";
    const llama_context_params a_bound = a;
    EXPECT_TRUE(llama_cancel_hook_bind(hook.get(), &a)) << "params that carry the hook already";
    EXPECT_TRUE(same(a, a_bound));

    llama_context_params b = llama_context_default_params();
    b.abort_callback       = host_counter::cb;
    b.abort_callback_data  = &second;
    const llama_context_params b_before = b;
    EXPECT_FALSE(llama_cancel_hook_bind(hook.get(), &b)) << "a hook serves one context";
    EXPECT_TRUE(same(b, b_before));

    // The first context's calls consult its own abort callback and put it back: never the second's.
    common::context_options o = options();
    o.cb_eval             = a.cb_eval;
    o.cb_eval_data        = a.cb_eval_user_data;
    o.abort_callback      = a.abort_callback;
    o.abort_callback_data = a.abort_callback_data;
    auto ctx = common::make_context(suite_model(), o);
    auto prompt = common::make_prompt(suite_model(), 64);
    common::seq_batch batch(prompt, 0, 32, 0);
    ASSERT_EQ(llama_cancel_decode(ctx.get(), batch.get(), nullptr, nullptr, nullptr), LLAMA_CANCEL_OK);
    common::seq_batch more(prompt, 32, 32, 32);
    ASSERT_EQ(llama_decode(ctx.get(), more.get()), 0);
    EXPECT_GT(first.calls, 0);
    EXPECT_EQ(second.calls, 0) << "the refused bind's abort callback reached the first context";
}

// The hook's chain is asked about every node the scheduler asks the hook about: the node where a
// stop was asked for too (the scheduler then leaves the graph, and asks no one about the rest).
TEST_F(Promises, TheChainIsAskedAboutEveryNodeAStopsToo) {
    int8_t byte = 0;
    fixtures::node_trigger chain; // while grouping: stores the call's byte at its 5th ask, answers false
    chain.byte           = &byte;
    chain.at             = 5;
    chain.while_grouping = true;
    auto h = fixtures::make_hooked(suite_model(), k_n, k_u, &chain);
    auto prompt = common::make_prompt(suite_model(), 64);
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.byte = &byte;
    common::seq_batch batch(prompt, 0, 32, 0);
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_decode(h.ctx.get(), batch.get(), &p, &r, nullptr), LLAMA_CANCEL_CANCELLED) << r.message;
    const llama_cancel_hook_stats s = llama_cancel_hook_get_stats(h.hook.get());
    EXPECT_GE(chain.calls, chain.at);
    EXPECT_EQ(static_cast<uint64_t>(chain.calls), s.asks) << "nodes the hook was asked about that its chain was not";
}
