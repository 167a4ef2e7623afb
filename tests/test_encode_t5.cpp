// llama_cancel_encode on an encoder-decoder model (T5, $LLAMA_CANCEL_T5_MODEL): a stopped encode is
// CANCELLED and leaves the previous encode's output, which a decode would use; encoded again, the
// decode is a clean run's bit for bit; the encode's own checks. CPU backend.
#include "fixtures.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

using fixtures::suite_model;

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

// reach of an encode: inside the graph with a hook bound, the CPU's nodes alone without one.
TEST_F(EncoderDecoder, TheEncodeSaysWhereTheByteWasRead) {
    const auto prompt = common::make_prompt(suite_model(), 24, 5);
    common::seq_batch b(prompt, 0, 24, 0);
    int8_t byte = 0;
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.byte = &byte;
    llama_cancel_decode_result r;
    common::hook_ptr hook = fixtures::make_hook(nullptr);
    auto hooked = context(hook.get());
    ASSERT_EQ(llama_cancel_encode(hooked.get(), b.get(), &p, &r), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.reach, LLAMA_CANCEL_REACH_GRAPH) << "a hook bound";
    auto plain = context(nullptr);
    ASSERT_EQ(llama_cancel_encode(plain.get(), b.get(), &p, &r), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.reach, LLAMA_CANCEL_REACH_CPU) << "no eval callback: the CPU's nodes only";
}
