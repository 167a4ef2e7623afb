// A cancel leaves exactly the committed tokens in memory, on every memory kind llama.cpp has: KV
// cache (llama), sliding window (gemma3), recurrent (mamba, mamba2) and hybrid (lfm2, qwen35).
//
// One model per process (LLAMA_CANCEL_MODEL), on one backend setup (LLAMA_CANCEL_BACKEND: cpu by
// default, vulkan, rpc1). The reference for "what a clean decode of the committed tokens leaves" is
// a fresh context that decodes them with plain llama_decode, one n_ubatch slice per call (the ubatch
// boundaries every path here shares), compared byte for byte through llama_state_seq_get_data.
// Stops are triggered at a chosen graph node, so no test depends on timing. The models at real
// models' proportions run the same tests on a shorter batch (LLAMA_CANCEL_TEST_BATCH="n,n_ubatch").
#include "fixtures.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <cstring>
#include <string>
#include <vector>

namespace {

using fixtures::node_trigger;
using fixtures::seq_state;
using fixtures::test_backend;

// Batch tokens and n_ubatch (four slices): 256,64 unless LLAMA_CANCEL_TEST_BATCH says otherwise.
int batch_size(int which) {
    int n = 256, u = 64;
    if (const char * e = std::getenv("LLAMA_CANCEL_TEST_BATCH")) {
        if (std::sscanf(e, "%d,%d", &n, &u) != 2 || u < 2 || n != 4 * u) {
            std::fprintf(stderr, "LLAMA_CANCEL_TEST_BATCH=%s: want \"n,n_ubatch\" with n = 4 * n_ubatch\n", e);
            std::exit(2);
        }
    }
    return which == 0 ? n : u;
}
const int k_n = batch_size(0); // batch tokens
const int k_u = batch_size(1); // n_ubatch

bool on_cpu() { return test_backend().name() == "cpu"; }

// A context of n_batch k_n, n_ubatch k_u on the setup under test; a hook bound the way hosts bind
// it when given.
common::context_ptr context(llama_cancel_hook * hook, uint32_t n_seq_max = 1, bool kv_unified = false,
                            uint32_t n_rs_seq = 0) {
    common::context_options o = fixtures::context_options(k_n, k_u, n_seq_max);
    o.kv_unified              = kv_unified;
    o.n_rs_seq                = n_rs_seq;
    return fixtures::make_backend_context(test_backend().model.get(), hook, o);
}

// Plain llama_decode of prompt[first, first + n) at its own positions, one k_u slice per call.
void decode_plain(llama_context * ctx, const std::vector<llama_token> & prompt, int first, int n) {
    for (int a = first; a < first + n; a += k_u) {
        const int k = std::min(k_u, first + n - a);
        common::seq_batch b(prompt, a, k, a);
        ASSERT_EQ(llama_decode(ctx, b.get()), 0) << "reference decode at " << a;
    }
}

void expect_same_state(const std::vector<uint8_t> & got, const std::vector<uint8_t> & want, const std::string & what) {
    EXPECT_EQ(got, want) << what;
}

void expect_same_logits(const std::vector<float> & got, const std::vector<float> & want, const std::string & what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << what;
}

struct reference {
    std::vector<uint8_t> state; // sequence 0 after `n` tokens
    std::vector<float>   logits; // last logits after all k_n tokens
};

reference clean(const std::vector<llama_token> & prompt, int n, uint32_t n_seq_max = 1, bool kv_unified = false,
                uint32_t n_rs_seq = 0) {
    reference r;
    // A state's bytes depend on n_seq_max, kv_unified (one KV stream per sequence, or one for all)
    // and n_rs_seq (rollback planes).
    auto ctx = context(nullptr, n_seq_max, kv_unified, n_rs_seq);
    decode_plain(ctx.get(), prompt, 0, n);
    r.state = seq_state(ctx.get(), 0);
    decode_plain(ctx.get(), prompt, n, k_n - n);
    r.logits = common::last_logits(ctx.get());
    return r;
}

// Graph nodes of one k_u slice: abort-callback calls (CPU) or eval-callback asks (any backend).
int nodes_per_slice(const std::vector<llama_token> & prompt, bool asks) {
    node_trigger count;
    int8_t unused = 0;
    count.byte = &unused;
    common::hook_ptr hook = fixtures::make_hook(asks ? &count : nullptr);
    auto ctx = context(asks ? hook.get() : nullptr);
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.hook = asks ? hook.get() : nullptr;
    if (!asks) {
        p.abort_callback      = node_trigger::abort_cb;
        p.abort_callback_data = &count;
    }
    common::seq_batch b(prompt, 0, k_u, 0);
    EXPECT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, nullptr, nullptr), LLAMA_CANCEL_OK);
    return count.calls;
}

// How a test's stop reaches the graph: the caller's abort callback (the CPU), a trigger chained
// behind the hook, or the stateless eval callback alone (the context's cb_eval, no hook: the
// contract name a host binds first).
enum class stop_path { abort, hook, stateless };

// A stop inside the third slice's graph: the byte stored at that node by the trigger.
struct third_slice_stop {
    node_trigger     trig;
    int8_t           byte = 0;
    stop_path        path;
    common::hook_ptr hook;

    third_slice_stop(int per_slice, stop_path how) : path(how) {
        trig.byte = &byte;
        trig.at   = 2 * per_slice + per_slice / 2;
        hook      = fixtures::make_hook(path == stop_path::hook ? &trig : nullptr);
    }
    third_slice_stop(int per_slice, bool hooked) : third_slice_stop(per_slice, hooked ? stop_path::hook : stop_path::abort) {}
    third_slice_stop(const third_slice_stop &) = delete;
    third_slice_stop & operator=(const third_slice_stop &) = delete;

    // The stateless path's cb_eval: stores the byte at ask number `at` (while the scheduler groups
    // nodes), then answers as llama_cancel_eval_callback with the byte as user data.
    static bool stateless_cb(ggml_tensor * t, bool ask, void * data) {
        auto * s = static_cast<third_slice_stop *>(data);
        if (ask && ++s->trig.calls == s->trig.at) {
            __atomic_store_n(&s->byte, 1, __ATOMIC_RELAXED);
        }
        return llama_cancel_eval_callback(t, ask, &s->byte);
    }

    // The hook to bind to the context: NULL on the other paths.
    llama_cancel_hook * bound_hook() const { return path == stop_path::hook ? hook.get() : nullptr; }

    // The context: the hook bound, or the stateless callback as its cb_eval, or neither.
    common::context_ptr make_context() {
        if (path != stop_path::stateless) {
            return context(bound_hook());
        }
        common::context_options o = fixtures::context_options(k_n, k_u, 1, stateless_cb, this);
        return fixtures::make_backend_context(test_backend().model.get(), nullptr, o);
    }

    // Default decode params but for the byte, the hook (its snapshot buffer) and the caller's abort
    // callback (abort path).
    llama_cancel_decode_params params() {
        llama_cancel_decode_params p = llama_cancel_decode_default_params();
        p.byte = &byte;
        p.hook = bound_hook();
        if (path == stop_path::abort) {
            p.abort_callback      = node_trigger::abort_cb;
            p.abort_callback_data = &trig;
        }
        return p;
    }
};

// Byte-exact comparisons need a backend that computes the same bytes twice.
void expect_two_clean_decodes_agree() {
    const auto prompt = common::make_prompt(test_backend().model.get(), k_n, 1);
    ASSERT_TRUE(clean(prompt, 2 * k_u).state == clean(prompt, 2 * k_u).state)
        << "two clean decodes differ on " << test_backend().name() << ": this backend cannot run this model reliably";
}

// The setup under test (LLAMA_CANCEL_BACKEND, the CPU when unset) and the model on it, all layers
// offloaded; a setup that gives two clean decodes different bytes runs no test.
const auto * const g_environment = fixtures::add_backend_environment([] {
    fixtures::backend_environment_options o;
    o.model_env       = "LLAMA_CANCEL_MODEL";
    o.model_what      = "a model from scripts/make_model.py";
    o.default_backend = "cpu";
    o.check           = expect_two_clean_decodes_agree;
    return o;
}());

} // namespace

// Where a batch asks for outputs: its last token only (as every prefill does), or also token
// k_early_output, before the last ubatch.
enum class outputs { last, early };
// How gtest names the parameter in its messages.
void PrintTo(outputs o, std::ostream * os) { *os << (o == outputs::last ? "last_output" : "early_output"); }

// The early output's batch index.
constexpr int k_early_output = 10;

// A stop with default decode params keeps its finished slices, whichever callback stopped it. A batch
// with an output before its last ubatch goes a slice per call only up to that output's ubatch, then
// the rest in one call (llama.cpp keeps only the last call's outputs): where a stop undoes a whole
// call (an eval callback's stop, or recurrent state), the slices before that ubatch are what stays.
// On the CPU the stateless path's byte, stored while the scheduler groups nodes, is seen first by
// the call's abort callback at the next node computed (ggml's scheduler returns the abort before
// it asks the eval callback again): that stop is the abort path's.
int committed_on_third_slice_stop(stop_path how, outputs where) {
    llama_model * m = test_backend().model.get();
    const bool eval_stop = how == stop_path::hook || (how == stop_path::stateless && !on_cpu());
    const bool call_undone_whole = eval_stop || llama_model_is_recurrent(m) || llama_model_is_hybrid(m);
    return where == outputs::early && call_undone_whole ? k_early_output / k_u * k_u : 2 * k_u;
}

class MemoryKinds : public ::testing::TestWithParam<outputs> {
  protected:
    // Decodes k_n tokens through llama_cancel_decode (default params) with a stop inside the third
    // slice's graph (through `how`), checks the committed
    // count and the memory against a clean decode of the committed tokens, then resumes and checks
    // the final logits bit for bit against an uninterrupted decode.
    void cancel_and_resume(stop_path how, outputs where, uint32_t seed) {
        ASSERT_TRUE(how != stop_path::abort || on_cpu())
            << "ggml calls the abort callback on the CPU backend only: tests/CMakeLists.txt filters these out elsewhere";
        auto prompt = common::make_prompt(test_backend().model.get(), k_n, seed);
        const int per_slice = nodes_per_slice(prompt, how != stop_path::abort);
        ASSERT_GT(per_slice, 8);

        third_slice_stop stop(per_slice, how);
        auto ctx = stop.make_context();
        llama_cancel_decode_params p = stop.params();
        p.n_seq = 1;
        llama_cancel_decode_result r;
        llama_cancel_seq_result per_seq[1] = {{INT32_MIN, INT32_MIN, INT32_MIN}};
        common::seq_batch b(prompt, 0, k_n, 0);
        if (where == outputs::early) {
            b.set_output(k_early_output, true);
        }
        ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, per_seq), LLAMA_CANCEL_CANCELLED) << r.message;
        ASSERT_GE(stop.trig.calls, stop.trig.at) << "the stop landed";
        EXPECT_EQ(per_seq[0].n_committed, r.n_committed);
        EXPECT_EQ(per_seq[0].output, -1) << "no output after a cancel";
        EXPECT_EQ(r.n_committed, committed_on_third_slice_stop(how, where))
            << (where == outputs::last ? "the two finished slices are kept by default" : "the call is undone whole");
        EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), 0), r.n_committed - 1);

        const reference want = clean(prompt, r.n_committed);
        expect_same_state(seq_state(ctx.get(), 0), want.state,
                          "memory differs from a clean decode of " + std::to_string(r.n_committed) + " tokens");
        stop.byte    = 0;
        stop.trig.at = -1;
        common::seq_batch rest(prompt, r.n_committed, k_n - r.n_committed, r.n_committed);
        llama_cancel_decode_result r2;
        ASSERT_EQ(llama_cancel_decode(ctx.get(), rest.get(), &p, &r2, nullptr), LLAMA_CANCEL_OK) << r2.message;
        const float * last = llama_cancel_get_logits_ith(ctx.get(), &r2, -1);
        ASSERT_NE(last, nullptr) << "the resumed decode has no last output";
        ASSERT_FALSE(want.logits.empty());
        expect_same_logits(std::vector<float>(last, last + want.logits.size()), want.logits, "resumed logits differ");
    }
};

TEST_P(MemoryKinds, AbortCallbackStopIsRolledBackExactly) { cancel_and_resume(stop_path::abort, GetParam(), 21); }

// Issue 22's done-when: with a hook bound and default decode params, a stop inside a long prefill
// keeps its finished slices and the resume is bit-identical (test_memory_mamba on the CPU,
// test_memory_llama_vulkan on Vulkan), on every memory kind and setup registered.
TEST_P(MemoryKinds, HookStopIsRolledBackExactly) { cancel_and_resume(stop_path::hook, GetParam(), 22); }

// Issue 30: the stateless contract name alone (no hook) keeps the finished slices too, on every
// memory kind and setup registered (Vulkan and RPC included).
TEST_P(MemoryKinds, StatelessStopIsRolledBackExactly) { cancel_and_resume(stop_path::stateless, GetParam(), 23); }

INSTANTIATE_TEST_SUITE_P(Outputs, MemoryKinds, ::testing::Values(outputs::last, outputs::early),
                         [](const auto & info) { return info.param == outputs::last ? "last_output" : "early_output"; });

TEST(MemoryKind, BytePresetLeavesMemoryUntouched) {
    auto prompt = common::make_prompt(test_backend().model.get(), k_n, 23);
    auto ctx = context(nullptr);
    decode_plain(ctx.get(), prompt, 0, k_u);
    const auto before = seq_state(ctx.get(), 0);
    int8_t byte = 1;
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.byte = &byte;
    llama_cancel_decode_result r;
    common::seq_batch b(prompt, k_u, k_n - k_u, k_u);
    EXPECT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr), LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.n_committed, 0);
    EXPECT_EQ(seq_state(ctx.get(), 0), before) << "the same context's bytes, untouched";
}

// Two sequences in one batch: per-sequence counts stay true and each sequence holds exactly what
// a clean decode of the same finished slices leaves.
TEST(MemoryKind, TwoSequencesInOneBatch) {
    const int per = k_n / 2;
    auto prompt = common::make_prompt(test_backend().model.get(), per, 24);
    std::vector<llama_token> tokens;
    std::vector<llama_pos> pos;
    std::vector<llama_seq_id> seq_ids;
    for (int i = 0; i < per; ++i) { // interleaved: every slice holds both sequences
        for (llama_seq_id s = 0; s < 2; ++s) {
            tokens.push_back(prompt[(i + 17 * s) % per]);
            pos.push_back(i);
            seq_ids.push_back(s);
        }
    }
    std::vector<int32_t> n_seq_id(k_n, 1);
    std::vector<llama_seq_id *> seq_ptr(k_n);
    std::vector<int8_t> logits(k_n, 0);
    for (int i = 0; i < k_n; ++i) {
        seq_ptr[i] = &seq_ids[i];
    }
    logits[k_n - 2] = logits[k_n - 1] = 1;
    auto batch_of = [&](int a, int n) {
        return llama_batch{n, tokens.data() + a, nullptr, pos.data() + a, n_seq_id.data() + a, seq_ptr.data() + a,
                           logits.data() + a};
    };

    const bool hooked = !on_cpu();
    const int per_slice = nodes_per_slice(tokens, hooked);
    third_slice_stop stop(per_slice, hooked);
    auto ctx = context(stop.bound_hook(), 2);
    ASSERT_NE(ctx, nullptr);
    llama_cancel_decode_params p = stop.params();
    p.n_seq = 2;
    llama_cancel_decode_result r;
    llama_cancel_seq_result per_seq[2] = {{INT32_MIN, INT32_MIN, INT32_MIN}, {INT32_MIN, INT32_MIN, INT32_MIN}};
    ASSERT_EQ(llama_cancel_decode(ctx.get(), batch_of(0, k_n), &p, &r, per_seq), LLAMA_CANCEL_CANCELLED)
        << r.message;
    EXPECT_EQ(r.n_committed, 2 * k_u);
    for (llama_seq_id s = 0; s < 2; ++s) {
        EXPECT_EQ(per_seq[s].n_committed, k_u) << "sequence " << s;
        EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), s), per_seq[s].n_committed - 1) << "sequence " << s;
    }
    auto ref = context(nullptr, 2);
    for (int a = 0; a < r.n_committed; a += k_u) {
        ASSERT_EQ(llama_decode(ref.get(), batch_of(a, k_u)), 0);
    }
    for (llama_seq_id s = 0; s < 2; ++s) {
        expect_same_state(seq_state(ctx.get(), s), seq_state(ref.get(), s), "sequence " + std::to_string(s));
    }
}

// The token loop stopped in its prefill resumes to the same tokens as an uninterrupted run.
TEST(MemoryKind, TokenLoopResumesToTheSameTokens) {
    auto prompt = common::make_prompt(test_backend().model.get(), k_n, 25);
    const int n_predict = 8;
    llama_cancel_generate_params gp = llama_cancel_generate_default_params();
    gp.n_predict = n_predict;

    std::vector<llama_token> want(n_predict), got(n_predict);
    {
        auto ctx = context(nullptr);
        llama_cancel_generate_result r;
        ASSERT_EQ(llama_cancel_generate(ctx.get(), prompt.data(), k_n, &gp, want.data(), n_predict, &r),
                  LLAMA_CANCEL_OK) << r.message;
    }
    const int per_slice = nodes_per_slice(prompt, true);
    third_slice_stop stop(per_slice, true);
    auto ctx = context(stop.bound_hook());
    gp.byte = &stop.byte;
    gp.hook = stop.bound_hook();
    llama_cancel_generate_result r;
    ASSERT_EQ(llama_cancel_generate(ctx.get(), prompt.data(), k_n, &gp, got.data(), n_predict, &r),
              LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_EQ(r.n_prompt_committed, 2 * k_u);
    EXPECT_EQ(r.n_past, 2 * k_u);
    EXPECT_EQ(r.n_generated, 0);

    stop.byte    = 0;
    stop.trig.at = -1;
    ASSERT_EQ(llama_cancel_generate(ctx.get(), prompt.data() + r.n_past, k_n - r.n_past, &gp, got.data(), n_predict,
                                    &r), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(got, want);
}

// The hook keeps one snapshot for every decode made with it. After a call on sequences 0 and 1 and
// steps on 1, a call on sequence 0 alone stopped in its third slice leaves both sequences exactly as
// plain llama_decode of the same committed calls does: the kept buffers of the first call (one
// entry per sequence) put nothing back into sequence 1. The hook counts a snapshot per started call
// on models with recurrent state (none on a KV cache), a restore per stop and a held step (no
// snapshot) per single-token decode.
TEST(MemoryKind, HookSnapshotIsKeptAcrossCalls) {
    const bool stateful = llama_model_is_recurrent(test_backend().model.get()) ||
                          llama_model_is_hybrid(test_backend().model.get());
    const int h = k_u / 2;
    auto prompt = common::make_prompt(test_backend().model.get(), h + k_n, 26);
    const int per_slice = nodes_per_slice(prompt, true);
    third_slice_stop stop(per_slice, true);
    const int stop_at = stop.trig.at;
    stop.trig.at      = -1;
    auto ctx = context(stop.bound_hook(), 2);
    auto ref = context(nullptr, 2);
    ASSERT_NE(ctx, nullptr);
    llama_cancel_decode_params p = stop.params();
    llama_cancel_decode_result r;

    // Sequences 0 and 1 interleaved in one slice, then three generation steps on sequence 1.
    llama_batch both = llama_batch_init(k_u, 0, 1);
    for (int i = 0; i < k_u; ++i) {
        both.token[i] = prompt[i / 2 + (i % 2) * 5];
        both.pos[i] = i / 2;
        both.n_seq_id[i] = 1;
        both.seq_id[i][0] = i % 2;
        both.logits[i] = i >= k_u - 2;
    }
    both.n_tokens = k_u;
    EXPECT_EQ(llama_cancel_decode(ctx.get(), both, &p, &r, nullptr), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(llama_decode(ref.get(), both), 0);
    llama_batch_free(both);
    for (int i = 0; i < 3; ++i) {
        common::seq_batch step(prompt, i, 1, h + i, 1);
        ASSERT_EQ(llama_cancel_decode(ctx.get(), step.get(), &p, &r, nullptr), LLAMA_CANCEL_OK) << r.message;
        ASSERT_EQ(llama_decode(ref.get(), step.get()), 0);
    }

    stop.trig.calls = 0;
    stop.trig.at    = stop_at;
    common::seq_batch b(prompt, h, k_n, h);
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr), LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_EQ(r.n_committed, 2 * k_u);
    decode_plain(ref.get(), prompt, h, 2 * k_u); // sequence 0, at positions from h: the same slices
    for (llama_seq_id s = 0; s < 2; ++s) {
        expect_same_state(seq_state(ctx.get(), s), seq_state(ref.get(), s), "sequence " + std::to_string(s));
    }

    const llama_cancel_snapshot_stats st = llama_cancel_hook_get_snapshot_stats(stop.bound_hook());
    const size_t state_bytes = llama_state_seq_get_size_ext(ctx.get(), 0, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
    EXPECT_EQ(st.snapshots, stateful ? 1u + 3u : 0u) << "one per started call: the two-sequence slice, three of sequence 0's";
    EXPECT_EQ(st.held_steps, stateful ? 3u : 0u) << "the generation steps run to their end, without a snapshot";
    EXPECT_EQ(st.restores, stateful ? 1u : 0u);
    // The first snapshot found both sequences empty (a few bytes of header), the others a full state.
    EXPECT_GE(st.bytes, stateful ? 3 * state_bytes : 0u);
    EXPECT_LT(st.bytes, stateful ? 4 * state_bytes : 1u);
    EXPECT_EQ(st.copy_ms > 0.0, stateful);
}

// A context with a spare sequence id (n_seq_max 2, sequence 0 used): the snapshot shares sequence
// 0's state cell with the spare one instead of copying it, where llama.cpp allows that (recurrent
// models; hybrid ones with one KV stream for all sequences; no n_rs_seq rollback planes). A stop in
// the third slice leaves exactly a clean decode's bytes, the spare sequence is empty after every
// call, and the resume is bit-identical. Where sharing is not allowed the snapshot is copied, as
// exactly.
struct kv_layout {
    bool     unified;
    uint32_t n_rs_seq; // asked for: llama.cpp keeps it on the architectures that have rollback planes
                       // (and aborts unless n_ubatch > n_rs_seq: 2, below the real models' 4)
};
void PrintTo(const kv_layout & k, std::ostream * os) { *os << "kv_unified " << k.unified << ", n_rs_seq " << k.n_rs_seq; }
class SpareSequence : public ::testing::TestWithParam<kv_layout> {};

TEST_P(SpareSequence, SnapshotSharesTheStateCell) {
    const kv_layout kv = GetParam();
    llama_model * model = test_backend().model.get();
    const bool recurrent = llama_model_is_recurrent(model);
    const bool stateful  = recurrent || llama_model_is_hybrid(model);
    auto prompt = common::make_prompt(model, k_n, 27);
    const int per_slice = nodes_per_slice(prompt, true);
    third_slice_stop stop(per_slice, true);
    auto ctx = context(stop.bound_hook(), 2, kv.unified, kv.n_rs_seq);
    ASSERT_NE(ctx, nullptr);
    const bool shares = (recurrent || (stateful && kv.unified)) && llama_n_rs_seq(ctx.get()) == 0;
    llama_cancel_decode_params p = stop.params();
    llama_cancel_decode_result r;
    common::seq_batch b(prompt, 0, k_n, 0);
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr), LLAMA_CANCEL_CANCELLED) << r.message;
    ASSERT_EQ(r.n_committed, 2 * k_u);
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), 1), -1) << "the spare sequence is empty again";
    const reference want = clean(prompt, r.n_committed, 2, kv.unified, kv.n_rs_seq);
    expect_same_state(seq_state(ctx.get(), 0), want.state, "sequence 0 after the stop");

    const llama_cancel_snapshot_stats st = llama_cancel_hook_get_snapshot_stats(stop.bound_hook());
    EXPECT_EQ(st.snapshots, stateful ? 3u : 0u) << "one per started slice";
    EXPECT_EQ(st.shared, shares ? 3u : 0u);
    EXPECT_EQ(st.restores, stateful ? 1u : 0u);
    EXPECT_EQ(st.bytes == 0, !stateful || shares) << "copied exactly when not shared";

    stop.byte    = 0;
    stop.trig.at = -1;
    common::seq_batch rest(prompt, r.n_committed, k_n - r.n_committed, r.n_committed);
    llama_cancel_decode_result r2;
    ASSERT_EQ(llama_cancel_decode(ctx.get(), rest.get(), &p, &r2, nullptr), LLAMA_CANCEL_OK) << r2.message;
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(ctx.get()), 1), -1) << "the spare sequence is empty again";
    const float * last = llama_cancel_get_logits_ith(ctx.get(), &r2, -1);
    ASSERT_NE(last, nullptr);
    expect_same_logits(std::vector<float>(last, last + want.logits.size()), want.logits, "resumed logits differ");
    expect_same_state(seq_state(ctx.get(), 0), clean(prompt, k_n, 2, kv.unified, kv.n_rs_seq).state,
                      "sequence 0 after the resume");
}

INSTANTIATE_TEST_SUITE_P(KvLayouts, SpareSequence,
                         ::testing::Values(kv_layout{true, 0}, kv_layout{false, 0}, kv_layout{true, 2}),
                         [](const auto & info) {
                             return std::string(info.param.unified ? "unified" : "per_sequence") +
                                    (info.param.n_rs_seq != 0 ? "_rollback_planes" : "");
                         });
