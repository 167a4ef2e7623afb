// llama_cancel_process over llama.h's llama_batch_ext on $LLAMA_CANCEL_PROCESS_MODEL (a KV-cache model
// and a recurrent one are registered): OK gives plain llama_process's logits; a stop at nodes across
// the call, seen by the hook or by the abort callback, is CANCELLED with memory byte for byte as
// before the call, and the call again gives the clean run's logits bit for bit; bad input is a clear
// ERROR. CPU backend.
#include "fixtures.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

using fixtures::suite_model;

constexpr int32_t k_prefix = 8;  // tokens in memory before the call
constexpr int32_t k_n      = 48; // the call's tokens

struct batch_ext_free {
    void operator()(llama_batch_ext * b) const { llama_batch_ext_free(b); }
};
using batch_ext_ptr = std::unique_ptr<llama_batch_ext, batch_ext_free>;

class Process : public fixtures::model_suite<Process> {
  public:
    static constexpr const char * model_env  = "LLAMA_CANCEL_PROCESS_MODEL";
    static constexpr const char * model_what = "a model from scripts/make_model.py";

    static common::context_ptr context(llama_cancel_hook * hook) {
        return fixtures::make_bound_context(suite_model(), hook, fixtures::context_options(64, 16));
    }
    // Tokens [k_prefix, k_prefix + k_n) of the prompt as an extended batch of sequence 0, the last
    // one an output.
    static batch_ext_ptr batch(llama_context * ctx, const std::vector<llama_token> & prompt) {
        batch_ext_ptr b(llama_batch_ext_init(ctx));
        for (int32_t i = k_prefix; i < k_prefix + k_n; ++i) {
            const int32_t idx = llama_batch_ext_add_token(b.get(), 0, prompt[i]);
            const llama_pos pos = i;
            EXPECT_GE(idx, 0);
            EXPECT_TRUE(llama_batch_ext_set_pos(b.get(), idx, &pos));
            if (i == k_prefix + k_n - 1) {
                EXPECT_TRUE(llama_batch_ext_set_output_logits(b.get(), idx, true));
            }
        }
        return b;
    }
    // The prompt's first k_prefix tokens into memory.
    static void prefix(llama_context * ctx, const std::vector<llama_token> & prompt) {
        common::seq_batch b(prompt, 0, k_prefix, 0);
        ASSERT_EQ(llama_cancel_decode(ctx, b.get(), nullptr, nullptr, nullptr), LLAMA_CANCEL_OK);
    }
    static std::vector<float> last_logits(llama_context * ctx) {
        const float * l = llama_get_logits_ith(ctx, -1);
        const int32_t n = llama_vocab_n_tokens(llama_model_get_vocab(suite_model()));
        return l != nullptr ? std::vector<float>(l, l + n) : std::vector<float>();
    }
};

// What a plain llama_process gives after the prefix, on a fresh context.
std::vector<float> plain_logits(const std::vector<llama_token> & prompt) {
    auto ctx = Process::context(nullptr);
    Process::prefix(ctx.get(), prompt);
    batch_ext_ptr b = Process::batch(ctx.get(), prompt);
    EXPECT_EQ(llama_process(ctx.get(), LLAMA_PROCESS_TYPE_DECODE, b.get()), 0);
    return Process::last_logits(ctx.get());
}

// Stops at nodes spread over the call (the hook's checkpoints, or the abort callback after a CPU
// node): each CANCELLED with memory as before the call, then the call again gives `want`.
void stops_put_memory_back(bool by_abort, const std::vector<llama_token> & prompt, const std::vector<float> & want) {
    fixtures::node_trigger count;
    {
        common::hook_ptr hook = fixtures::make_hook(by_abort ? nullptr : &count);
        auto ctx = Process::context(hook.get());
        Process::prefix(ctx.get(), prompt);
        count.calls = 0;
        batch_ext_ptr b = Process::batch(ctx.get(), prompt);
        llama_cancel_decode_params p = llama_cancel_decode_default_params();
        p.abort_callback      = by_abort ? fixtures::node_trigger::abort_cb : nullptr;
        p.abort_callback_data = &count;
        ASSERT_EQ(llama_cancel_process(ctx.get(), LLAMA_PROCESS_TYPE_DECODE, b.get(), &p, nullptr), LLAMA_CANCEL_OK);
    }
    ASSERT_GT(count.calls, 10);
    for (int k = 1; k <= 4; ++k) {
        int8_t byte = 0;
        fixtures::node_trigger trig;
        trig.byte = &byte;
        common::hook_ptr hook = fixtures::make_hook(by_abort ? nullptr : &trig);
        auto ctx = Process::context(hook.get());
        Process::prefix(ctx.get(), prompt);
        const std::vector<uint8_t> before = fixtures::seq_state(ctx.get(), 0);
        trig.calls = 0;
        trig.at    = count.calls * k / 5;
        batch_ext_ptr b = Process::batch(ctx.get(), prompt);
        llama_cancel_decode_params p = llama_cancel_decode_default_params();
        p.byte                = &byte;
        p.hook                = hook.get();
        p.abort_callback      = by_abort ? fixtures::node_trigger::abort_cb : nullptr;
        p.abort_callback_data = &trig;
        llama_cancel_decode_result r;
        ASSERT_EQ(llama_cancel_process(ctx.get(), LLAMA_PROCESS_TYPE_DECODE, b.get(), &p, &r), LLAMA_CANCEL_CANCELLED)
            << "stop at " << trig.at << ": " << r.message;
        EXPECT_EQ(r.n_committed, 0);
        EXPECT_EQ(fixtures::pos_max(ctx.get(), 0), k_prefix - 1);
        EXPECT_EQ(fixtures::seq_state(ctx.get(), 0), before) << "stop at " << trig.at;
        byte    = 0;
        trig.at = -1;
        ASSERT_EQ(llama_cancel_process(ctx.get(), LLAMA_PROCESS_TYPE_DECODE, b.get(), &p, &r), LLAMA_CANCEL_OK) << r.message;
        EXPECT_EQ(r.n_committed, -1);
        const std::vector<float> got = Process::last_logits(ctx.get());
        ASSERT_EQ(got.size(), want.size());
        EXPECT_EQ(std::memcmp(got.data(), want.data(), sizeof(float) * want.size()), 0) << "stop at " << k;
    }
}

} // namespace

TEST_F(Process, ByteAtZeroGivesPlainLlamaProcess) {
    const auto prompt = common::make_prompt(suite_model(), k_prefix + k_n, 3);
    const std::vector<float> want = plain_logits(prompt);
    ASSERT_FALSE(want.empty());
    common::hook_ptr hook = fixtures::make_hook(nullptr);
    auto ctx = context(hook.get());
    prefix(ctx.get(), prompt);
    batch_ext_ptr b = batch(ctx.get(), prompt);
    int8_t byte = 0;
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.byte = &byte;
    llama_cancel_decode_result r;
    ASSERT_EQ(llama_cancel_process(ctx.get(), LLAMA_PROCESS_TYPE_DECODE, b.get(), &p, &r), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.reach, LLAMA_CANCEL_REACH_GRAPH);
    EXPECT_EQ(fixtures::pos_max(ctx.get(), 0), k_prefix + k_n - 1);
    const std::vector<float> got = last_logits(ctx.get());
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), sizeof(float) * want.size()), 0);
}

TEST_F(Process, HookStopPutsMemoryBackAndTheCallAgainIsBitIdentical) {
    const auto prompt = common::make_prompt(suite_model(), k_prefix + k_n, 3);
    stops_put_memory_back(false, prompt, plain_logits(prompt));
}

TEST_F(Process, AbortCallbackStopPutsMemoryBackAndTheCallAgainIsBitIdentical) {
    const auto prompt = common::make_prompt(suite_model(), k_prefix + k_n, 3);
    stops_put_memory_back(true, prompt, plain_logits(prompt));
}

// A byte set on entry: CANCELLED, nothing touched; bad input: clear ERRORs, memory untouched.
TEST_F(Process, ByteOnEntryAndBadInput) {
    const auto prompt = common::make_prompt(suite_model(), k_prefix + k_n, 3);
    auto ctx = context(nullptr);
    prefix(ctx.get(), prompt);
    batch_ext_ptr b = batch(ctx.get(), prompt);
    int8_t byte = 1;
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.byte = &byte;
    llama_cancel_decode_result r;
    EXPECT_EQ(llama_cancel_process(ctx.get(), LLAMA_PROCESS_TYPE_DECODE, b.get(), &p, &r), LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.n_decode_calls, 0);
    byte = 0;
    EXPECT_EQ(llama_cancel_process(ctx.get(), 7, b.get(), &p, &r), LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::string(r.message).find("type"), std::string::npos) << r.message;
    p.max_stop_ms = 5.0f;
    EXPECT_EQ(llama_cancel_process(ctx.get(), LLAMA_PROCESS_TYPE_DECODE, b.get(), &p, &r), LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::string(r.message).find("max_stop_ms"), std::string::npos) << r.message;
    EXPECT_EQ(llama_cancel_process(ctx.get(), LLAMA_PROCESS_TYPE_DECODE, nullptr, nullptr, &r), LLAMA_CANCEL_ERROR);
    EXPECT_EQ(fixtures::pos_max(ctx.get(), 0), k_prefix - 1);
}

// The abort callback the host had in the context params its hook was bound into is consulted during
// the call whether params.hook names that hook or leaves it to be found, as in llama_cancel_decode.
TEST_F(Process, TheHostsBoundAbortCallbackIsConsultedWithTheHookNamedOrFound) {
    struct counter {
        int         calls = 0;
        static bool cb(void * data) {
            ++static_cast<counter *>(data)->calls;
            return false;
        }
    };
    const auto prompt = common::make_prompt(suite_model(), k_prefix + k_n, 3);
    for (const bool named : {true, false}) {
        for (const bool by_process : {true, false}) {
            counter host;
            common::context_options o = fixtures::context_options(64, 16);
            o.abort_callback          = counter::cb;
            o.abort_callback_data     = &host;
            common::hook_ptr hook     = fixtures::make_hook(nullptr);
            auto ctx = fixtures::make_bound_context(suite_model(), hook.get(), o);
            prefix(ctx.get(), prompt);
            host.calls = 0;
            int8_t byte = 0;
            llama_cancel_decode_params p = llama_cancel_decode_default_params();
            p.byte = &byte;
            p.hook = named ? hook.get() : nullptr;
            llama_cancel_decode_result r;
            if (by_process) {
                batch_ext_ptr b = batch(ctx.get(), prompt);
                ASSERT_EQ(llama_cancel_process(ctx.get(), LLAMA_PROCESS_TYPE_DECODE, b.get(), &p, &r), LLAMA_CANCEL_OK)
                    << r.message;
            } else {
                common::seq_batch b(prompt, k_prefix, k_n, k_prefix);
                ASSERT_EQ(llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr), LLAMA_CANCEL_OK) << r.message;
            }
            EXPECT_GT(host.calls, 0) << (by_process ? "llama_cancel_process" : "llama_cancel_decode") << " with the hook "
                                     << (named ? "named" : "found") << " never consulted the host's abort callback";
        }
    }
}
