// llama_cancel_embed and llama_cancel_encode on an embedding model ($LLAMA_CANCEL_EMBED_MODEL, pooled
// as $LLAMA_CANCEL_EMBED_POOLING says: mean, cls, last, rank, or empty for the model's own): rows
// against llama.cpp's own idiom, stops at nodes across the whole call keeping exactly the finished
// groups, resumes bit for bit, a store from another thread, the contract names alone, bad input.
// CPU backend.
#include "fixtures.h"

#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using fixtures::suite_model;

constexpr int     k_seqs   = 12;  // sequences of the batch
constexpr int32_t k_ubatch = 48;  // a group: whole sequences up to this many tokens
constexpr float   k_unset  = 1e30f; // what a row holds before anything writes it

class Embed : public fixtures::model_suite<Embed> {
  public:
    static constexpr const char * model_env  = "LLAMA_CANCEL_EMBED_MODEL";
    static constexpr const char * model_what = "an embedding model from scripts/make_model.py";

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
        return fixtures::make_bound_context(suite_model(), hook, opt);
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
        EXPECT_LT(fixtures::relative_difference(got, std::vector<float>(want, want + n_out)), 1e-4) << "sequence " << s;
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

void stop_keeps_finished_groups(common::owned_batch & b, bool by_abort, common::context_ptr (*make)(llama_cancel_hook *)) {
    fixtures::node_trigger count;
    std::vector<float> want;
    {
        common::hook_ptr hook = fixtures::make_hook(by_abort ? nullptr : &count);
        auto ctx = make(hook.get());
        want.assign(static_cast<size_t>(k_seqs) * llama_cancel_embed_n_out(ctx.get()), k_unset);
        llama_cancel_embed_params p = llama_cancel_embed_default_params();
        p.abort_callback      = by_abort ? fixtures::node_trigger::abort_cb : nullptr;
        p.abort_callback_data = &count;
        ASSERT_EQ(llama_cancel_embed(ctx.get(), b.get(), &p, want.data(), want.size(), nullptr), LLAMA_CANCEL_OK);
    }
    const int n_calls = count.calls;
    ASSERT_GT(n_calls, 20);
    int n_partial = 0; // stops that kept some groups and not all
    for (int k = 1; k <= 9; ++k) {
        int8_t byte = 0;
        fixtures::node_trigger trig;
        trig.at   = n_calls * k / 10;
        trig.byte = &byte;
        common::hook_ptr hook = fixtures::make_hook(by_abort ? nullptr : &trig);
        auto ctx = make(hook.get());
        std::vector<float> out(want.size(), k_unset);
        llama_cancel_embed_params p = llama_cancel_embed_default_params();
        p.byte = &byte;
        p.hook = hook.get();
        p.abort_callback      = by_abort ? fixtures::node_trigger::abort_cb : nullptr;
        p.abort_callback_data = &trig;
        llama_cancel_embed_result r;
        const llama_batch all = b.get();
        ASSERT_EQ(llama_cancel_embed(ctx.get(), all, &p, out.data(), out.size(), &r), LLAMA_CANCEL_CANCELLED)
            << "stop at call " << trig.at << ": " << r.message;
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
                EXPECT_EQ(fixtures::pos_max(ctx.get(), s) >= 0, done[s]) << "sequence " << s << ", stop at " << trig.at;
            }
        }
        const int at = trig.at;
        byte    = 0;
        trig.at = -1;
        ASSERT_EQ(llama_cancel_embed(ctx.get(), tail(all, r.n_committed), &p, out.data(), out.size(), &r), LLAMA_CANCEL_OK)
            << r.message;
        EXPECT_EQ(std::memcmp(out.data(), want.data(), sizeof(float) * out.size()), 0)
            << "resumed after a stop at call " << at;
    }
    EXPECT_GT(n_partial, 0); // some stops fell after a finished group
}

} // namespace

TEST_F(Embed, StopKeepsFinishedGroupsAndResumesBitForBit) {
    common::owned_batch b = batch();
    stop_keeps_finished_groups(b, false, [](llama_cancel_hook * h) { return context(h); });
}

TEST_F(Embed, AbortCallbackStopKeepsFinishedGroupsAndResumesBitForBit) {
    common::owned_batch b = batch();
    stop_keeps_finished_groups(b, true, [](llama_cancel_hook * h) { return context(h); });
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

namespace {

// An encoder-decoder model (T5) from $LLAMA_CANCEL_T5_MODEL.
class EncoderDecoder : public fixtures::model_suite<EncoderDecoder> {
  public:
    static constexpr const char * model_env  = "LLAMA_CANCEL_T5_MODEL";
    static constexpr const char * model_what = "a t5 model from scripts/make_model.py --arch t5";

  protected:
    static common::context_ptr context(llama_cancel_hook * hook) {
        return fixtures::make_bound_context(suite_model(), hook, fixtures::context_options(64, 64));
    }
    // The decoder's logits for its start token after `prompt` was encoded.
    static std::vector<float> first_logits(llama_context * ctx) {
        const llama_token start = llama_model_decoder_start_token(suite_model());
        common::seq_batch b({start}, 0, 1, 0);
        llama_cancel_decode_result r;
        EXPECT_EQ(llama_cancel_decode(ctx, b.get(), nullptr, &r, nullptr), LLAMA_CANCEL_OK) << r.message;
        const float * l = llama_cancel_get_logits_ith(ctx, &r, -1);
        const int32_t n = llama_vocab_n_tokens(llama_model_get_vocab(suite_model()));
        return l != nullptr ? std::vector<float>(l, l + n) : std::vector<float>();
    }
};

} // namespace

// A stopped encode is CANCELLED with nothing committed; the context still holds the encode before
// it, which a decode would use: encoded again, the decode gives a clean run's logits bit for bit.
TEST_F(EncoderDecoder, AStoppedEncodeIsCancelledAndTheEncodeAgainDecodesLikeACleanRun) {
    ASSERT_TRUE(llama_model_has_encoder(suite_model()) && llama_model_has_decoder(suite_model()));
    const auto prompt = common::make_prompt(suite_model(), 24, 5);
    const auto other  = common::make_prompt(suite_model(), 24, 9);
    std::vector<float> want;
    fixtures::node_trigger count;
    {
        common::hook_ptr hook = fixtures::make_hook(&count);
        auto ctx = context(hook.get());
        common::seq_batch b(prompt, 0, 24, 0);
        llama_cancel_decode_result r;
        ASSERT_EQ(llama_cancel_encode(ctx.get(), b.get(), nullptr, &r), LLAMA_CANCEL_OK) << r.message;
        EXPECT_EQ(r.n_committed, 24);
        want = first_logits(ctx.get());
        ASSERT_FALSE(want.empty());
    }
    int8_t byte = 0;
    fixtures::node_trigger trig;
    trig.byte = &byte;
    common::hook_ptr hook = fixtures::make_hook(&trig);
    auto ctx = context(hook.get());
    common::seq_batch ob(other, 0, 24, 0);
    ASSERT_EQ(llama_cancel_encode(ctx.get(), ob.get(), nullptr, nullptr), LLAMA_CANCEL_OK);
    const int n_encode_asks = trig.calls;
    trig.calls = 0;
    trig.at    = n_encode_asks / 2; // inside the encode of `prompt`
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.byte = &byte;
    p.hook = hook.get();
    common::seq_batch b(prompt, 0, 24, 0);
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_encode(ctx.get(), b.get(), &p, &r), LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_EQ(r.n_committed, 0);
    EXPECT_EQ(fixtures::pos_max(ctx.get(), 0), -1); // the decoder's memory untouched
    byte    = 0;
    trig.at = -1;
    ASSERT_EQ(llama_cancel_encode(ctx.get(), b.get(), &p, &r), LLAMA_CANCEL_OK) << r.message;
    const std::vector<float> got = first_logits(ctx.get());
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), sizeof(float) * want.size()), 0);
}

// An encode on a model without an encoder, and seq_bytes or a budget on an encode: clear ERRORs.
TEST_F(EncoderDecoder, EncodeArgumentsAreCheckedFirst) {
    auto ctx = context(nullptr);
    const auto prompt = common::make_prompt(suite_model(), 8, 5);
    common::seq_batch b(prompt, 0, 8, 0);
    int8_t one = 0;
    const int8_t * bytes[1] = {&one};
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.seq_bytes = bytes;
    p.n_seq     = 1;
    llama_cancel_decode_result r;
    EXPECT_EQ(llama_cancel_encode(ctx.get(), b.get(), &p, &r), LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::string(r.message).find("seq_bytes"), std::string::npos) << r.message;
    p           = llama_cancel_decode_default_params();
    p.max_stop_ms = 5.0f;
    EXPECT_EQ(llama_cancel_encode(ctx.get(), b.get(), &p, &r), LLAMA_CANCEL_ERROR);
    EXPECT_EQ(llama_cancel_encode(nullptr, b.get(), nullptr, &r), LLAMA_CANCEL_ERROR);
}
