// llama_cancel_decode on the tiny synthetic model, CPU backend.
//
// Cancels are triggered deterministically: a caller abort callback (or an eval callback) counts
// graph nodes and stores the byte at a chosen node, so each test knows which ubatch it stopped.
#include "fixtures.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using fixtures::gate;
using fixtures::node_trigger;
using fixtures::pos_max;
using fixtures::suite_model;

class Decode : public fixtures::model_suite<Decode> {
  public:
    static constexpr const char * model_env  = "LLAMA_CANCEL_TINY_MODEL";
    static constexpr const char * model_what = "a model from scripts/make_model.py";

  protected:
    static common::context_ptr context(uint32_t n_batch, uint32_t n_ubatch, uint32_t n_seq_max = 1) {
        return fixtures::make_bound_context(suite_model(), nullptr,
                                            fixtures::context_options(n_batch, n_ubatch, n_seq_max));
    }
};

// The abort callback of `counter` (fixtures::node_trigger: counts calls, stores the byte at call `at`).
llama_cancel_decode_params params_with(int8_t * byte, node_trigger * counter = nullptr) {
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.byte = byte;
    if (counter != nullptr) {
        p.abort_callback      = node_trigger::abort_cb;
        p.abort_callback_data = counter;
    }
    return p;
}

// Waits until `done()` holds, at most 20 s; false on time-out (the caller fails with a message).
template <typename Done> bool wait_until(Done done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) {
            return false;
        }
        std::this_thread::yield();
    }
    return true;
}

} // namespace

class DecodeTest : public Decode {
  protected:
    // Graph nodes the CPU backend computes for one ubatch of `n` tokens (abort-callback calls).
    int nodes_per_ubatch(uint32_t n) {
        auto ctx = context(n, n);
        auto prompt = common::make_prompt(suite_model(), n);
        common::seq_batch b(prompt, 0, n, 0);
        node_trigger counter;
        int8_t byte = 0;
        auto p = params_with(&byte, &counter);
        EXPECT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, nullptr, nullptr), LLAMA_CANCEL_OK);
        return counter.calls;
    }
};

TEST_F(DecodeTest, ByteAtZeroDecodesLikeLlamaDecode) {
    const int n = 64;
    auto prompt = common::make_prompt(suite_model(), n);

    auto plain = context(n, 16);
    common::seq_batch b1(prompt, 0, n, 0);
    ASSERT_EQ(llama_decode(plain.get(), b1.get()), 0);
    const auto want = common::last_logits(plain.get());

    auto ctx = context(n, 16);
    int8_t byte = 0;
    auto p = params_with(&byte);
    llama_cancel_decode_result r;
    llama_cancel_seq_result per_seq[1] = {{-1, -1, -1}};
    p.n_seq = 1;
    common::seq_batch b2(prompt, 0, n, 0);
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b2.get(), &p, &r, per_seq), LLAMA_CANCEL_OK);
    EXPECT_EQ(r.status, LLAMA_CANCEL_OK);
    EXPECT_EQ(r.decode_ret, 0);
    EXPECT_EQ(r.n_committed, n);
    EXPECT_EQ(per_seq[0].n_committed, n);
    EXPECT_STREQ(r.message, "");
    EXPECT_EQ(pos_max(ctx.get()), n - 1);
    const auto got = common::last_logits(ctx.get());
    ASSERT_FALSE(want.empty());
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
    // The one documented way to read an output by batch index gives the same logits.
    const float * by_index = llama_cancel_get_logits_ith(ctx.get(), &r, n - 1);
    ASSERT_NE(by_index, nullptr);
    EXPECT_EQ(std::memcmp(by_index, want.data(), want.size() * sizeof(float)), 0);
    ASSERT_GE(per_seq[0].output, 0) << "the sequence's last output is reported";
    EXPECT_EQ(std::memcmp(llama_get_logits_ith(ctx.get(), per_seq[0].output), want.data(), want.size() * sizeof(float)), 0);
}

// result.reach says where the byte was read: inside every graph where a llama-cancel eval callback
// ran in it (the hook, the stateless name with a byte), else the abort callback's nodes alone (the
// CPU: another device's split would have run to its end). A host without a hook learns it here.
TEST_F(DecodeTest, TheResultSaysWhereTheByteWasRead) {
    const int n      = 32;
    const auto prompt = common::make_prompt(suite_model(), n);
    int8_t     byte   = 0;
    auto reach_of = [&](common::context_ptr ctx) {
        common::seq_batch b(prompt, 0, n, 0);
        llama_cancel_decode_params p = params_with(&byte);
        llama_cancel_decode_result r;
        r.reach = -1;
        EXPECT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr), LLAMA_CANCEL_OK) << r.message;
        return r.reach;
    };
    common::hook_ptr hook = fixtures::make_hook(nullptr);
    EXPECT_EQ(reach_of(fixtures::make_bound_context(suite_model(), hook.get(), fixtures::context_options(n, n))),
              LLAMA_CANCEL_REACH_GRAPH)
        << "a hook bound";
    common::context_options o = fixtures::context_options(n, n);
    o.cb_eval      = llama_cancel_eval_callback;
    o.cb_eval_data = &byte;
    EXPECT_EQ(reach_of(common::make_context(suite_model(), o)), LLAMA_CANCEL_REACH_GRAPH) << "the stateless name";
    o.cb_eval_data = nullptr; // the name bound without a byte reads none
    EXPECT_EQ(reach_of(common::make_context(suite_model(), o)), LLAMA_CANCEL_REACH_CPU);
    EXPECT_EQ(reach_of(context(n, n)), LLAMA_CANCEL_REACH_CPU)
        << "no eval callback: the abort callback's CPU nodes only";
}

TEST_F(DecodeTest, BytePresetReturnsCancelledWithoutComputingOrTouchingMemory) {
    auto ctx = context(64, 16);
    auto prompt = common::make_prompt(suite_model(), 48);
    common::seq_batch first(prompt, 0, 16, 0);
    ASSERT_EQ(llama_decode(ctx.get(), first.get()), 0);

    int8_t byte = 1;
    node_trigger counter;
    auto p = params_with(&byte, &counter);
    llama_cancel_decode_result r;
    llama_cancel_seq_result per_seq[1] = {{-1, -1, -1}};
    p.n_seq = 1;
    common::seq_batch rest(prompt, 16, 32, 16);
    EXPECT_EQ(llama_cancel_decode(ctx.get(), rest.get(), &p, &r, per_seq), LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.status, LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.decode_ret, 0) << "llama_decode must not be called";
    EXPECT_EQ(r.n_committed, 0);
    EXPECT_EQ(per_seq[0].n_committed, 0);
    EXPECT_EQ(counter.calls, 0);
    EXPECT_EQ(pos_max(ctx.get()), 15);
    EXPECT_EQ(byte, 1) << "the byte is the caller's: never reset";
}

TEST_F(DecodeTest, CancelInsideOnlyUbatchLeavesMemoryAsBefore) {
    const int n = 64;
    const int nodes = nodes_per_ubatch(n);
    ASSERT_GT(nodes, 4);

    auto ctx = context(n, n);
    auto prompt = common::make_prompt(suite_model(), 8 + n);
    common::seq_batch first(prompt, 0, 8, 0);
    ASSERT_EQ(llama_decode(ctx.get(), first.get()), 0);

    int8_t byte = 0;
    node_trigger counter;
    counter.byte = &byte;
    counter.at   = nodes / 2;
    auto p = params_with(&byte, &counter);
    llama_cancel_decode_result r;
    llama_cancel_seq_result per_seq[1] = {{-1, -1, -1}};
    p.n_seq = 1;
    common::seq_batch b(prompt, 8, n, 8);
    EXPECT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, per_seq), LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.decode_ret, 2);
    EXPECT_EQ(r.n_committed, 0);
    EXPECT_EQ(per_seq[0].n_committed, 0);
    EXPECT_EQ(pos_max(ctx.get()), 7) << "the stopped ubatch's positions are dropped";
    EXPECT_LT(counter.calls, nodes) << "the decode stopped inside the graph";
}

TEST_F(DecodeTest, CancelInSecondUbatchKeepsFirst) {
    const int n = 64, u = 16;
    const int nodes = nodes_per_ubatch(u);

    auto ctx = context(n, u);
    auto prompt = common::make_prompt(suite_model(), n);
    int8_t byte = 0;
    node_trigger counter;
    counter.byte = &byte;
    counter.at   = nodes + nodes / 2;
    auto p = params_with(&byte, &counter);
    llama_cancel_decode_result r;
    llama_cancel_seq_result per_seq[1] = {{-1, -1, -1}};
    p.n_seq = 1;
    common::seq_batch b(prompt, 0, n, 0);
    EXPECT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, per_seq), LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.decode_ret, 2);
    EXPECT_EQ(r.n_committed, u);
    EXPECT_EQ(per_seq[0].n_committed, u);
    EXPECT_EQ(pos_max(ctx.get()), u - 1);
}

TEST_F(DecodeTest, CommittedCountsPerSequence) {
    // Two sequences, one after the other in the batch; the stop lands in sequence 1's first ubatch.
    const int per = 32, u = 16;
    const int nodes = nodes_per_ubatch(u);
    auto ctx = context(2 * per, u, 2);
    ASSERT_NE(ctx, nullptr);
    auto prompt = common::make_prompt(suite_model(), per);

    std::vector<llama_token> tokens;
    std::vector<llama_pos> pos;
    std::vector<int32_t> n_seq_id(2 * per, 1);
    std::vector<llama_seq_id> seq_ids(2 * per);
    std::vector<llama_seq_id *> seq_ptr(2 * per);
    std::vector<int8_t> logits(2 * per, 0);
    for (int s = 0; s < 2; ++s) {
        for (int i = 0; i < per; ++i) {
            tokens.push_back(prompt[i]);
            pos.push_back(i);
            seq_ids[s * per + i] = s;
        }
    }
    for (int i = 0; i < 2 * per; ++i) {
        seq_ptr[i] = &seq_ids[i];
    }
    logits[per - 1] = logits[2 * per - 1] = 1;
    llama_batch b{2 * per, tokens.data(), nullptr, pos.data(), n_seq_id.data(), seq_ptr.data(), logits.data()};

    int8_t byte = 0;
    node_trigger counter;
    counter.byte = &byte;
    counter.at   = 2 * nodes + nodes / 2;
    auto p = params_with(&byte, &counter);
    llama_cancel_decode_result r;
    llama_cancel_seq_result per_seq[2] = {{-1, -1, -1}, {-1, -1, -1}};
    p.n_seq = 2;
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b, &p, &r, per_seq), LLAMA_CANCEL_CANCELLED);
    for (int s = 0; s < 2; ++s) {
        EXPECT_EQ(per_seq[s].n_committed, pos_max(ctx.get(), s) + 1) << "sequence " << s;
    }
    EXPECT_EQ(per_seq[0].n_committed + per_seq[1].n_committed, 2 * u) << "two whole ubatches committed";
    // The committed prefix, read from memory: leading batch tokens whose position their sequence holds.
    int prefix = 0;
    while (prefix < 2 * per && pos[prefix] <= pos_max(ctx.get(), seq_ids[prefix])) {
        ++prefix;
    }
    EXPECT_EQ(r.n_committed, prefix);
}

TEST_F(DecodeTest, ResumeFromCommittedIsBitIdenticalAndSkipsCommittedUbatches) {
    const int n = 128, u = 32;
    const int nodes = nodes_per_ubatch(u);
    auto prompt = common::make_prompt(suite_model(), n, 7);

    auto ref = context(n, u);
    common::seq_batch whole(prompt, 0, n, 0);
    ASSERT_EQ(llama_decode(ref.get(), whole.get()), 0);
    const auto want = common::last_logits(ref.get());

    auto ctx = context(n, u);
    int8_t byte = 0;
    node_trigger counter;
    counter.byte = &byte;
    counter.at   = 2 * nodes + 3;
    auto p = params_with(&byte, &counter);
    llama_cancel_decode_result r;
    common::seq_batch b(prompt, 0, n, 0);
    ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr), LLAMA_CANCEL_CANCELLED);
    ASSERT_EQ(r.n_committed, 2 * u);
    ASSERT_EQ(pos_max(ctx.get()), 2 * u - 1);

    byte = 0;
    node_trigger resume_counter;
    auto p2 = params_with(&byte, &resume_counter);
    common::seq_batch rest(prompt, r.n_committed, n - r.n_committed, r.n_committed);
    ASSERT_EQ(llama_cancel_decode(ctx.get(), rest.get(), &p2, &r, nullptr), LLAMA_CANCEL_OK);
    EXPECT_EQ(resume_counter.calls, 2 * nodes) << "only the two missing ubatches are computed";
    EXPECT_EQ(pos_max(ctx.get()), n - 1);
    const auto got = common::last_logits(ctx.get());
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << "resumed logits differ";
}

TEST_F(DecodeTest, CallersAbortCallbackIsConsultedAndRestored) {
    auto ctx = context(64, 64);
    auto prompt = common::make_prompt(suite_model(), 64);
    int8_t byte = 0;
    node_trigger mine;
    auto p = params_with(&byte, &mine);
    common::seq_batch a(prompt, 0, 16, 0);
    ASSERT_EQ(llama_cancel_decode(ctx.get(), a.get(), &p, nullptr, nullptr), LLAMA_CANCEL_OK);
    const int during = mine.calls;
    EXPECT_GT(during, 0) << "the caller's callback runs beside the byte";

    // After the call the caller's callback, not the byte reader, is installed: a set byte does not
    // stop a plain llama_decode, and the caller's callback still counts.
    byte = 1;
    common::seq_batch b(prompt, 16, 16, 16);
    EXPECT_EQ(llama_decode(ctx.get(), b.get()), 0);
    EXPECT_GT(mine.calls, during);

    // With no caller callback, none is left installed either.
    byte = 0;
    auto bare = params_with(&byte);
    common::seq_batch c(prompt, 32, 16, 32);
    ASSERT_EQ(llama_cancel_decode(ctx.get(), c.get(), &bare, nullptr, nullptr), LLAMA_CANCEL_OK);
    byte = 1;
    common::seq_batch d(prompt, 48, 16, 48);
    EXPECT_EQ(llama_decode(ctx.get(), d.get()), 0);
}

// The plain reader (no caller callback) stops the graph; the byte is stored from an eval callback.
TEST_F(DecodeTest, ExportedReaderStopsGraphWithoutCallerCallback) {
    int8_t byte = 0;
    node_trigger trig; // the context's cb_eval: stores the byte once node 5 is computed
    trig.byte = &byte;
    trig.at   = 5;
    auto ctx = fixtures::make_bound_context(suite_model(), nullptr,
                                            fixtures::context_options(32, 32, 1, node_trigger::eval_cb, &trig));
    auto prompt = common::make_prompt(suite_model(), 32);
    common::seq_batch b(prompt, 0, 32, 0);
    auto p = params_with(&byte);
    llama_cancel_decode_result r;
    EXPECT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr), LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.decode_ret, 2);
    EXPECT_EQ(pos_max(ctx.get()), -1);
}

// A real cross-thread store: the worker decodes, the main thread stores the byte once the graph
// is running; every reader call ran on the worker.
TEST_F(DecodeTest, StoreFromAnotherThreadStopsDecodeOnWorkerThread) {
    auto ctx = context(256, 256);
    auto prompt = common::make_prompt(suite_model(), 256);
    int8_t byte = 0;
    gate g;
    g.byte    = &byte;
    g.hold_at = 1;
    llama_cancel_decode_params p = params_with(&byte);
    p.abort_callback      = gate::cb;
    p.abort_callback_data = &g;

    int32_t status = 99;
    std::thread::id worker_id;
    std::thread worker([&] {
        worker_id = std::this_thread::get_id();
        common::seq_batch b(prompt, 0, 256, 0);
        status = llama_cancel_decode(ctx.get(), b.get(), &p, nullptr, nullptr);
    });
    const bool started = wait_until([&] { return g.started.load(); });
    __atomic_store_n(&byte, 1, __ATOMIC_RELAXED); // also releases a worker that is still starting
    worker.join();
    ASSERT_TRUE(started) << "the decode never reached its first graph node within 20 s";
    EXPECT_FALSE(g.timed_out) << "the gate released the graph without seeing the store";
    EXPECT_EQ(status, LLAMA_CANCEL_CANCELLED);
    ASSERT_FALSE(g.threads.empty());
    for (const auto & id : g.threads) {
        EXPECT_EQ(id, worker_id);
    }
    EXPECT_EQ(pos_max(ctx.get()), -1);
}

TEST_F(DecodeTest, NullContextIsAClearError) {
    int8_t byte = 0;
    auto p = params_with(&byte);
    auto prompt = common::make_prompt(suite_model(), 4);
    common::seq_batch b(prompt, 0, 4, 0);
    llama_cancel_decode_result r;
    EXPECT_EQ(llama_cancel_decode(nullptr, b.get(), &p, &r, nullptr), LLAMA_CANCEL_ERROR);
    EXPECT_EQ(r.status, LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::string(r.message).find("ctx is NULL"), std::string::npos) << r.message;
    EXPECT_EQ(llama_cancel_decode(nullptr, b.get(), nullptr, nullptr, nullptr), LLAMA_CANCEL_ERROR);
}

TEST_F(DecodeTest, BatchLargerThanNBatchIsAClearErrorAndLosesNothing) {
    auto ctx = context(32, 32);
    auto prompt = common::make_prompt(suite_model(), 40);
    common::seq_batch first(prompt, 0, 8, 0);
    ASSERT_EQ(llama_decode(ctx.get(), first.get()), 0);
    int8_t byte = 0;
    auto p = params_with(&byte);
    llama_cancel_decode_result r;
    common::seq_batch big(prompt, 0, 40, 8);
    EXPECT_EQ(llama_cancel_decode(ctx.get(), big.get(), &p, &r, nullptr), LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::string(r.message).find("more than the context's n_batch 32"), std::string::npos) << r.message;
    EXPECT_EQ(pos_max(ctx.get()), 7);
    // The context still works.
    common::seq_batch next(prompt, 8, 8, 8);
    EXPECT_EQ(llama_cancel_decode(ctx.get(), next.get(), &p, &r, nullptr), LLAMA_CANCEL_OK);
    EXPECT_EQ(pos_max(ctx.get()), 15);
}

TEST_F(DecodeTest, InvalidTokensAndSequencesAreClearErrors) {
    auto ctx = context(32, 32);
    auto prompt = common::make_prompt(suite_model(), 8);
    llama_cancel_decode_result r;

    prompt[3] = llama_vocab_n_tokens(llama_model_get_vocab(suite_model()));
    common::seq_batch bad_token(prompt, 0, 8, 0);
    EXPECT_EQ(llama_cancel_decode(ctx.get(), bad_token.get(), nullptr, &r, nullptr), LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::string(r.message).find("outside the vocabulary"), std::string::npos) << r.message;

    prompt[3] = 5;
    common::seq_batch bad_seq(prompt, 0, 8, 0, 3);
    EXPECT_EQ(llama_cancel_decode(ctx.get(), bad_seq.get(), nullptr, &r, nullptr), LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::string(r.message).find("sequence id 3"), std::string::npos) << r.message;

    llama_batch empty{};
    EXPECT_EQ(llama_cancel_decode(ctx.get(), empty, nullptr, &r, nullptr), LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::string(r.message).find("at least one"), std::string::npos) << r.message;
    EXPECT_EQ(pos_max(ctx.get()), -1);
}

// A store after llama_cancel_decode returned changes nothing of that decode; the next call sees it.
TEST_F(DecodeTest, CancelAfterTheDecodeReturnedOnlyAffectsTheNextCall) {
    auto ctx = context(64, 32);
    auto prompt = common::make_prompt(suite_model(), 64);
    int8_t byte = 0;
    auto p = params_with(&byte);
    common::seq_batch a(prompt, 0, 32, 0);
    ASSERT_EQ(llama_cancel_decode(ctx.get(), a.get(), &p, nullptr, nullptr), LLAMA_CANCEL_OK);
    const auto logits = common::last_logits(ctx.get());
    __atomic_store_n(&byte, 1, __ATOMIC_RELAXED); // too late for that decode
    llama_cancel_decode_result r;
    common::seq_batch b(prompt, 32, 32, 32);
    EXPECT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr), LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.n_committed, 0);
    EXPECT_EQ(pos_max(ctx.get()), 31);
    EXPECT_EQ(common::last_logits(ctx.get()), logits) << "a cancelled-on-entry call leaves the outputs too";
}

// Two threads store into the byte at the same moment while the graph runs: one clean cancel.
TEST_F(DecodeTest, TwoThreadsCancellingAtOnce) {
    auto ctx = context(256, 64);
    auto prompt = common::make_prompt(suite_model(), 256);
    int8_t byte = 0;
    gate g;
    g.byte    = &byte;
    g.hold_at = 5; // inside the first ubatch
    llama_cancel_decode_params p = params_with(&byte);
    p.abort_callback      = gate::cb;
    p.abort_callback_data = &g;
    llama_cancel_decode_result r;
    int32_t status = 99;
    std::thread worker([&] {
        common::seq_batch b(prompt, 0, 256, 0);
        status = llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr);
    });
    const bool started = wait_until([&] { return g.started.load(); });
    std::atomic<int> ready{0};
    auto cancel = [&] {
        ready.fetch_add(1);
        EXPECT_TRUE(wait_until([&] { return ready.load() >= 2; })) << "the other storing thread never started";
        __atomic_store_n(&byte, 1, __ATOMIC_RELAXED);
    };
    std::thread c1(cancel), c2(cancel);
    c1.join();
    c2.join();
    worker.join();
    ASSERT_TRUE(started) << "the decode never reached the held graph node within 20 s";
    EXPECT_FALSE(g.timed_out) << "the gate released the graph without seeing the store";
    EXPECT_EQ(status, LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.n_committed, 0);
    EXPECT_EQ(pos_max(ctx.get()), -1);
}
