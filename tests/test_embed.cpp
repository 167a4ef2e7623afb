// llama_cancel_embed and llama_cancel_encode on an embedding model ($LLAMA_CANCEL_EMBED_MODEL, pooled
// as $LLAMA_CANCEL_EMBED_POOLING says: mean, cls, last, rank, or empty for the model's own), on the
// backend setup $LLAMA_CANCEL_BACKEND (default cpu): rows against llama.cpp's own idiom, stops at
// nodes across the whole call (the hook's checkpoints, the stateless name's, the CPU's abort
// callback) keeping exactly the finished groups, resumes bit for bit, a store from another thread,
// the contract names alone, bad input.
#include "fixtures.h"

#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using fixtures::test_backend;

llama_model * suite_model() {
    return test_backend().model.get();
}

constexpr int     k_seqs   = 12;  // sequences of the batch
constexpr int32_t k_ubatch = 48;  // a group: whole sequences up to this many tokens
constexpr float   k_unset  = 1e30f; // what a row holds before anything writes it

class Embed : public ::testing::Test {
  public:
    static enum llama_pooling_type pooling() {
        const std::string p = fixtures::env("LLAMA_CANCEL_EMBED_POOLING");
        return p == "mean" ? LLAMA_POOLING_TYPE_MEAN
             : p == "cls"  ? LLAMA_POOLING_TYPE_CLS
             : p == "last" ? LLAMA_POOLING_TYPE_LAST
             : p == "rank" ? LLAMA_POOLING_TYPE_RANK
                           : LLAMA_POOLING_TYPE_UNSPECIFIED;
    }
    // An embeddings context; with `hook`, bound the way a host binds it.
    static common::context_ptr context(llama_cancel_hook * hook, ggml_backend_sched_eval_callback cb = nullptr,
                                       void * cb_data = nullptr, enum llama_pooling_type pool = pooling()) {
        common::context_options opt = fixtures::context_options(512, k_ubatch, k_seqs, cb, cb_data);
        opt.embeddings = true;
        opt.pooling    = pool;
        return fixtures::make_backend_context(suite_model(), hook, opt);
    }
    // k_seqs sequences of 5..20 tokens, one after another, sequence s at positions 0.. (the
    // embedding example's batch).
    static common::owned_batch batch() {
        common::owned_batch b;
        for (int s = 0; s < k_seqs; ++s) {
            const auto tokens = common::make_prompt(suite_model(), 5 + (s * 7) % 16, 100 + s);
            for (size_t i = 0; i < tokens.size(); ++i) {
                b.add(tokens[i], static_cast<llama_pos>(i), {s}, true);
            }
        }
        return b;
    }
    static std::vector<float> rows(llama_context * ctx) {
        return std::vector<float>(static_cast<size_t>(k_seqs) * llama_cancel_embed_n_out(ctx), k_unset);
    }
};

const auto * const g_environment = fixtures::add_backend_environment([] {
    fixtures::backend_environment_options o;
    o.model_env       = "LLAMA_CANCEL_EMBED_MODEL";
    o.model_what      = "an embedding model from scripts/make_model.py";
    o.default_backend = "cpu";
    return o;
}());

// Tokens [from, n) of `b` as a batch sharing its arrays, as a host resumes.
llama_batch tail(llama_batch b, int32_t from) {
    b.n_tokens -= from;
    b.token += from;
    b.pos += from;
    b.n_seq_id += from;
    b.seq_id += from;
    b.logits += from;
    return b;
}

// Sequence id of batch token i.
llama_seq_id seq_at(const llama_batch & b, int32_t i) {
    return b.seq_id[i][0];
}

} // namespace

// Every row equals llama.cpp's own idiom for that sequence alone (llama_decode or llama_encode,
// then llama_get_embeddings_seq), within float rounding of a different batch shape; finite, and
// sequences differ.
TEST_F(Embed, RowsAreLlamaCppsOwn) {
    auto ctx = context(nullptr);
    ASSERT_TRUE(ctx);
    const int32_t n_out = llama_cancel_embed_n_out(ctx.get());
    ASSERT_GT(n_out, 0);
    common::owned_batch b = batch();
    std::vector<float>  out = rows(ctx.get());
    llama_cancel_embed_result r;
    ASSERT_EQ(llama_cancel_embed(ctx.get(), b.get(), nullptr, out.data(), out.size(), &r), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_committed, b.size());
    EXPECT_EQ(r.n_seq_done, k_seqs);
    EXPECT_EQ(r.n_out, n_out);
    EXPECT_GT(r.n_calls, 1); // more than one group: the stops below fall between and inside groups

    const llama_model * model = suite_model();
    const bool encoder = llama_model_has_encoder(model);
    for (int s = 0; s < k_seqs; ++s) {
        auto ref = context(nullptr);
        common::owned_batch one;
        const llama_batch all = b.get();
        for (int32_t i = 0; i < all.n_tokens; ++i) {
            if (seq_at(all, i) == s) {
                one.add(all.token[i], all.pos[i], {0}, true);
            }
        }
        ASSERT_EQ(encoder ? llama_encode(ref.get(), one.get()) : llama_decode(ref.get(), one.get()), 0);
        const float * want = llama_get_embeddings_seq(ref.get(), 0);
        ASSERT_NE(want, nullptr);
        const std::vector<float> got(out.begin() + s * n_out, out.begin() + (s + 1) * n_out);
        // Other batch shapes than the call's groups: float rounding apart (on llvmpipe, its kernels' own).
        const double bound = test_backend().name() == "cpu" ? 1e-4 : 1e-2;
        EXPECT_LT(fixtures::relative_difference(got, std::vector<float>(want, want + n_out)), bound) << "sequence " << s;
        for (float v : got) {
            ASSERT_TRUE(std::isfinite(v)) << "sequence " << s;
        }
    }
    if (n_out > 1) {
        EXPECT_NE(std::memcmp(out.data(), out.data() + n_out, sizeof(float) * n_out), 0);
    }
}

// A byte stored at nodes spread over the whole call, seen by the hook's checkpoints (`by_abort`
// false) or by the abort callback after a CPU node (true: llama.cpp returns 2 and keeps the
// ubatches it finished): CANCELLED with exactly the sequences of batch[0, n_committed) written (bit
// for bit the uninterrupted call's), the others untouched, memory holding those sequences alone;
// the resume from n_committed completes every row bit for bit.
namespace {

enum class stop_by { hook, stateless, abort_callback };

// One context of the stop test with its trigger: the hook's chain, the stateless name's probe, or
// the abort callback.
struct stop_context {
    common::hook_ptr        hook;
    common::context_ptr     ctx;
    fixtures::node_trigger  trig;
    common::stateless_probe probe;
    int8_t                  byte = 0;
    stop_by                 by;

    explicit stop_context(stop_by b) : by(b) {
        trig.byte = &byte;
        if (by == stop_by::hook) {
            hook = fixtures::make_hook(&trig);
        }
        ctx = by == stop_by::stateless ? Embed::context(nullptr, common::stateless_probe::eval_cb, &probe)
                                       : Embed::context(hook.get());
    }
    int calls() const { return by == stop_by::stateless ? probe.asks : trig.calls; }
    void arm(int at) {
        byte = 0;
        if (by == stop_by::stateless) {
            // Stored before ask `at`, where the stateless name's check while grouping sees it: a
            // store during a node of a graph that runs uncut would be read only as it returns.
            probe.rearm(at);
            probe.while_grouping = true;
        } else {
            trig.calls = 0;
            trig.at    = at;
        }
    }
    void clear() { arm(-1); }
    int8_t * the_byte() { return by == stop_by::stateless ? &probe.byte : &byte; }
    llama_cancel_embed_params params() {
        llama_cancel_embed_params p = llama_cancel_embed_default_params();
        p.byte                = the_byte();
        p.hook                = hook.get();
        p.abort_callback      = by == stop_by::abort_callback ? fixtures::node_trigger::abort_cb : nullptr;
        p.abort_callback_data = &trig;
        return p;
    }
};

void stop_keeps_finished_groups(common::owned_batch & b, stop_by by) {
    std::vector<float> want;
    int n_calls = 0;
    {
        stop_context c(by);
        c.clear();
        want.assign(static_cast<size_t>(k_seqs) * llama_cancel_embed_n_out(c.ctx.get()), k_unset);
        llama_cancel_embed_params p = c.params();
        ASSERT_EQ(llama_cancel_embed(c.ctx.get(), b.get(), &p, want.data(), want.size(), nullptr), LLAMA_CANCEL_OK);
        n_calls = c.calls();
    }
    ASSERT_GT(n_calls, 20);
    int n_partial = 0; // stops that kept some groups and not all
    for (int k = 1; k <= 9; ++k) {
        stop_context c(by);
        c.arm(n_calls * k / 10);
        auto & ctx = c.ctx;
        std::vector<float> out(want.size(), k_unset);
        llama_cancel_embed_params p = c.params();
        llama_cancel_embed_result r;
        const llama_batch all = b.get();
        const int32_t status = llama_cancel_embed(ctx.get(), all, &p, out.data(), out.size(), &r);
        ASSERT_EQ(status, LLAMA_CANCEL_CANCELLED) << "stop at call " << n_calls * k / 10 << ": " << r.message;
        ASSERT_GE(r.n_committed, 0);
        ASSERT_LT(r.n_committed, all.n_tokens);
        n_partial += r.n_committed > 0 ? 1 : 0;
        const int32_t n_out = r.n_out;
        std::vector<bool> done(k_seqs, false);
        for (int32_t i = 0; i < r.n_committed; ++i) {
            done[seq_at(all, i)] = true;
        }
        EXPECT_EQ(r.n_seq_done, static_cast<int32_t>(std::count(done.begin(), done.end(), true)));
        for (int s = 0; s < k_seqs; ++s) {
            const size_t o = static_cast<size_t>(s) * n_out;
            if (done[s]) {
                EXPECT_EQ(std::memcmp(out.data() + o, want.data() + o, sizeof(float) * n_out), 0) << "sequence " << s;
            } else {
                EXPECT_EQ(out[o], k_unset) << "sequence " << s << " was written, though not finished";
            }
            if (!llama_model_has_encoder(suite_model()) && llama_get_memory(ctx.get()) != nullptr) {
                // finished sequences hold their tokens, the stopped group's none (an encoder's
                // memory, T5's decoder cache, is never written)
                EXPECT_EQ(fixtures::pos_max(ctx.get(), s) >= 0, done[s]) << "sequence " << s << ", stop at " << k;
            }
        }
        const int at = n_calls * k / 10;
        c.clear();
        ASSERT_EQ(llama_cancel_embed(ctx.get(), tail(all, r.n_committed), &p, out.data(), out.size(), &r), LLAMA_CANCEL_OK)
            << r.message;
        if (test_backend().name() == "cpu") {
            EXPECT_EQ(std::memcmp(out.data(), want.data(), sizeof(float) * out.size()), 0)
                << "resumed after a stop at call " << at;
        } else {
            // A KV model's resumed groups meet other cells than the uninterrupted call's (the
            // stopped group's were freed): llvmpipe's attention rounds them apart.
            EXPECT_LT(fixtures::relative_difference(out, want), 1e-2) << "resumed after a stop at call " << at;
        }
    }
    EXPECT_GT(n_partial, 0); // some stops fell after a finished group
}

} // namespace

TEST_F(Embed, StopKeepsFinishedGroupsAndResumesBitForBit) {
    common::owned_batch b = batch();
    stop_keeps_finished_groups(b, stop_by::hook);
}

TEST_F(Embed, StatelessNameStopKeepsFinishedGroupsAndResumesBitForBit) {
    common::owned_batch b = batch();
    stop_keeps_finished_groups(b, stop_by::stateless);
}

TEST_F(Embed, AbortCallbackStopKeepsFinishedGroupsAndResumesBitForBit) {
    common::owned_batch b = batch();
    stop_keeps_finished_groups(b, stop_by::abort_callback);
}

// Another thread stores the byte while a graph runs (the host's abort callback holds it at a node
// until then), on a context whose cb_eval is the contract's stateless name: CANCELLED, nothing
// written, and the host's abort callback is the context's again afterwards.
TEST_F(Embed, StoreFromAnotherThreadStopsTheCall) {
    int8_t byte = 0;
    auto ctx = context(nullptr, llama_cancel_eval_callback, &byte);
    fixtures::gate g;
    g.byte    = &byte;
    g.hold_at = 3;
    common::owned_batch b = batch();
    std::vector<float>  out = rows(ctx.get());
    std::thread other([&] {
        while (!g.started.load()) {
            std::this_thread::yield();
        }
        __atomic_store_n(&byte, 1, __ATOMIC_RELAXED);
    });
    llama_cancel_embed_params p = llama_cancel_embed_default_params();
    p.byte                = &byte;
    p.abort_callback      = fixtures::gate::cb;
    p.abort_callback_data = &g;
    llama_cancel_embed_result r;
    const int32_t status = llama_cancel_embed(ctx.get(), b.get(), &p, out.data(), out.size(), &r);
    other.join();
    EXPECT_FALSE(g.timed_out.load());
    EXPECT_EQ(status, LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_EQ(r.n_committed, 0);
    EXPECT_EQ(r.n_seq_done, 0);
    for (float v : out) {
        ASSERT_EQ(v, k_unset);
    }
    // the host's callback is back: a plain call now reaches it
    const int calls = g.calls;
    byte = 0;
    common::seq_batch one(common::make_prompt(suite_model(), 4, 3), 0, 4, 0, 0);
    llama_memory_clear(llama_get_memory(ctx.get()), true);
    const llama_model * model = suite_model();
    const bool encoder = llama_model_has_encoder(model);
    EXPECT_EQ(encoder ? llama_encode(ctx.get(), one.get()) : llama_decode(ctx.get(), one.get()), 0);
    EXPECT_GT(g.calls, calls);
}

// A host that binds only the contract's two names, with the byte as user data, gets a stop in an
// embedding graph: llama.cpp returns 2 (the CPU's abort callback), nothing reported as success.
TEST_F(Embed, TheContractNamesAloneStopAnEmbeddingGraph) {
    int8_t byte = 1;
    auto ctx = context(nullptr, llama_cancel_eval_callback, &byte);
    llama_set_abort_callback(ctx.get(), llama_cancel_abort_callback, &byte);
    common::owned_batch b = batch();
    const llama_model * model = suite_model();
    const bool encoder = llama_model_has_encoder(model);
    const llama_batch first = b.get();
    llama_batch one = first;
    one.n_tokens = 5; // sequence 0's first tokens: one graph
    EXPECT_EQ(encoder ? llama_encode(ctx.get(), one) : llama_decode(ctx.get(), one), 2);
}

// A byte set on entry: CANCELLED at once, nothing decoded or written.
TEST_F(Embed, ByteSetOnEntryDoesNothing) {
    auto ctx = context(nullptr);
    common::owned_batch b = batch();
    std::vector<float>  out = rows(ctx.get());
    int8_t byte = 1;
    llama_cancel_embed_params p = llama_cancel_embed_default_params();
    p.byte = &byte;
    llama_cancel_embed_result r;
    EXPECT_EQ(llama_cancel_embed(ctx.get(), b.get(), &p, out.data(), out.size(), &r), LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.n_committed, 0);
    EXPECT_EQ(r.n_calls, 0);
    for (float v : out) {
        ASSERT_EQ(v, k_unset);
    }
}

// Bad input: ERROR with a message, no row written, memory untouched.
TEST_F(Embed, BadInputIsAClearErrorAndLosesNothing) {
    auto ctx = context(nullptr);
    std::vector<float> out = rows(ctx.get());
    auto expect_error = [&](llama_context * c, llama_batch bb, size_t n_out_max, const char * what) {
        llama_cancel_embed_result r;
        EXPECT_EQ(llama_cancel_embed(c, bb, nullptr, out.data(), n_out_max, &r), LLAMA_CANCEL_ERROR) << what;
        EXPECT_NE(r.message[0], 0) << what;
        EXPECT_EQ(r.n_calls, 0) << what;
        for (int s = 0; s < k_seqs && llama_get_memory(c) != nullptr; ++s) {
            EXPECT_EQ(fixtures::pos_max(c, s), -1) << what;
        }
    };
    common::owned_batch b = batch();
    expect_error(ctx.get(), b.get(), out.size() - 1, "out one float short");

    common::owned_batch apart; // sequence 0, then 1, then 0 again
    for (llama_seq_id s : {0, 1, 0}) {
        apart.add(5, s == 0 && apart.size() > 0 ? 1 : 0, {s}, true);
    }
    expect_error(ctx.get(), apart.get(), out.size(), "a sequence's tokens apart");

    common::owned_batch shared; // a token in two sequences
    shared.add(5, 0, {0, 1}, true);
    expect_error(ctx.get(), shared.get(), out.size(), "a token in two sequences");

    common::owned_batch longer; // one sequence longer than n_ubatch
    const auto tokens = common::make_prompt(suite_model(), k_ubatch + 1, 7);
    for (size_t i = 0; i < tokens.size(); ++i) {
        longer.add(tokens[i], static_cast<llama_pos>(i), {0}, true);
    }
    expect_error(ctx.get(), longer.get(), out.size(), "a sequence longer than n_ubatch");

    auto plain = context(nullptr, nullptr, nullptr, LLAMA_POOLING_TYPE_NONE);
    expect_error(plain.get(), b.get(), out.size(), "pooling NONE");
    for (float v : out) {
        ASSERT_EQ(v, k_unset);
    }
}

// llama_cancel_encode on a model with an encoder; a batch over n_ubatch is an ERROR there, and
// through llama_cancel_decode on a context without memory, where llama.cpp would assert.
TEST_F(Embed, AnEncodeOverNUbatchIsAnError) {
    const llama_model * model = suite_model();
    auto ctx = context(nullptr);
    const auto tokens = common::make_prompt(model, k_ubatch + 1, 7);
    common::seq_batch b(tokens, 0, static_cast<int32_t>(tokens.size()), 0);
    llama_cancel_decode_result r;
    if (!llama_model_has_encoder(model)) {
        EXPECT_EQ(llama_cancel_encode(ctx.get(), b.get(), nullptr, &r), LLAMA_CANCEL_ERROR);
        EXPECT_NE(std::string(r.message).find("no encoder"), std::string::npos) << r.message;
        return;
    }
    EXPECT_EQ(llama_cancel_encode(ctx.get(), b.get(), nullptr, &r), LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::string(r.message).find("n_ubatch"), std::string::npos) << r.message;
    if (llama_get_memory(ctx.get()) == nullptr) {
        EXPECT_EQ(llama_cancel_decode(ctx.get(), b.get(), nullptr, &r, nullptr), LLAMA_CANCEL_ERROR);
        EXPECT_NE(std::string(r.message).find("n_ubatch"), std::string::npos) << r.message;
    }
}


// reach: the worst of the call's graphs, inside every graph with a hook bound; without an eval
// callback of ours, outside the device's splits (the CPU's nodes alone, or between graphs).
TEST_F(Embed, TheResultSaysWhereTheByteWasRead) {
    common::owned_batch b = batch();
    int8_t byte = 0;
    llama_cancel_embed_params p = llama_cancel_embed_default_params();
    p.byte = &byte;
    llama_cancel_embed_result r;
    common::hook_ptr hook = fixtures::make_hook(nullptr);
    auto hooked = context(hook.get());
    std::vector<float> out = rows(hooked.get());
    ASSERT_EQ(llama_cancel_embed(hooked.get(), b.get(), &p, out.data(), out.size(), &r), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.reach, LLAMA_CANCEL_REACH_GRAPH) << "a hook bound";
    auto plain = context(nullptr);
    ASSERT_EQ(llama_cancel_embed(plain.get(), b.get(), &p, out.data(), out.size(), &r), LLAMA_CANCEL_OK) << r.message;
    EXPECT_NE(r.reach, LLAMA_CANCEL_REACH_GRAPH) << "no eval callback";
}
