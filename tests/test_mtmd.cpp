// llama_cancel_mtmd_eval_chunks on synthetic projectors (vision: gemma3, audio: whisper + ultravox)
// next to the small text model, CPU backend: stops in an encode, in a decode, between chunks, and
// resumes. How the callbacks get into mtmd (init from file, the stateless binding) is in
// test_mtmd_binding.cpp; the helpers and the Mtmd suite are in mtmd_fixtures.h.
//
// Each prompt holds two media items: text, media, text, media, text. Stops are triggered
// deterministically: a callback chained behind a llama_cancel_hook counts the nodes the scheduler
// asks about and stores the byte at a chosen one, in the clip encode or in a chosen decode graph;
// no test depends on timing.
#include "mtmd_fixtures.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

using namespace mtmd_test;

TEST_P(Mtmd, ByteAtZeroMatchesUpstreamHelper) {
    setup s(k.mmproj);
    llama_cancel_mtmd_result r;
    ASSERT_EQ(s.eval(chunks.get(), 0, 0, k.n_batch, &r), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.status, LLAMA_CANCEL_OK);
    EXPECT_EQ(r.n_chunks_done, n_chunks);
    EXPECT_EQ(r.n_past, want_n_past);
    EXPECT_EQ(pos_max(s.lctx.get()), want_n_past - 1);
    EXPECT_TRUE(same(common::last_logits(s.lctx.get()), want)) << "logits differ from mtmd_helper_eval_chunks";
    EXPECT_GT(s.enc_trig.calls, 0) << "the encodes ran through the hook bound to the mtmd context";
    EXPECT_EQ(static_cast<int>(s.dec_trig.graph_ends.size()), graphs_before(n_chunks));
    EXPECT_EQ(r.reach, LLAMA_CANCEL_REACH_GRAPH) << "a hook bound to the llama context";
    EXPECT_EQ(r.mtmd_reach, LLAMA_CANCEL_REACH_GRAPH) << "a hook bound to the mtmd context";

    // A second request on the same contexts, after clearing the sequence: the same result (causal
    // attention was restored after the media chunks).
    llama_memory_clear(llama_get_memory(s.lctx.get()), true);
    ASSERT_EQ(s.eval(chunks.get(), 0, 0, k.n_batch, &r), LLAMA_CANCEL_OK) << r.message;
    EXPECT_TRUE(same(common::last_logits(s.lctx.get()), want));

    // One hook set by hand as both contexts' cb_eval (the header asks for one per context; nothing
    // refuses this, since neither is bound through llama_cancel_hook_bind): still the same logits.
    fixtures::node_trigger unused;
    auto     shared = fixtures::make_hook(&unused);
    auto     mctx   = make_mtmd(k.mmproj, llama_cancel_hook_eval_callback, shared.get());
    auto     lctx   = make_lctx(llama_cancel_hook_eval_callback, shared.get());
    int8_t   byte   = 0;
    llama_cancel_mtmd_params p = llama_cancel_mtmd_default_params();
    p.byte        = &byte;
    p.hook = shared.get();
    p.n_batch     = k.n_batch;
    ASSERT_EQ(mtmd_test::eval_chunks(mctx.get(), shared.get(), lctx.get(), chunks.get(), 0, 0, &p, &r),
              LLAMA_CANCEL_OK)
        << r.message;
    EXPECT_TRUE(same(common::last_logits(lctx.get()), want)) << "with one shared hook";
}

// LLAMA_CANCEL_MTMD_BATCH_ENCODE where nothing batches (gemma3's clip graph does not, whisper's
// audio chunks never do, and text lies between the media chunks anyway): each chunk is encoded on
// its own as without the option, the same graphs and logits. Batches themselves: test_mtmd_batch.
TEST_P(Mtmd, BatchEncodeOptionWhereNothingBatches) {
    setup plain(k.mmproj), batched(k.mmproj);
    llama_cancel_mtmd_result r;
    ASSERT_EQ(plain.eval(chunks.get(), 0, 0, k.n_batch, &r), LLAMA_CANCEL_OK) << r.message;
    const llama_cancel_mtmd_params p = batched.params(k.n_batch);
    ASSERT_EQ(mtmd_test::eval_chunks(batched.mctx.get(), batched.enc_hook.get(), batched.lctx.get(),
                                                chunks.get(), 0, 0, &p, &r, LLAMA_CANCEL_MTMD_BATCH_ENCODE),
              LLAMA_CANCEL_OK)
        << r.message;
    EXPECT_EQ(r.n_past, want_n_past);
    EXPECT_TRUE(same(common::last_logits(batched.lctx.get()), want));
    EXPECT_EQ(batched.enc_trig.calls, plain.enc_trig.calls) << "the same encodes";
}

TEST_P(Mtmd, BytePresetCancelsWithMemoryUntouched) {
    setup s(k.mmproj);
    // Something in memory already: chunk 0 (the cancel at the first node of chunk 1's encode).
    llama_cancel_mtmd_result r;
    s.enc_trig.at = 1;
    ASSERT_EQ(s.eval(chunks.get(), 0, 0, k.n_batch, &r), LLAMA_CANCEL_CANCELLED);
    ASSERT_EQ(r.n_chunks_done, 1);
    s.rearm();

    s.byte = 1;
    ASSERT_EQ(s.eval(chunks.get(), 1, r.n_past, k.n_batch, &r), LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.status, LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.n_chunks_done, 1);
    EXPECT_EQ(r.n_past, start[1]);
    EXPECT_EQ(pos_max(s.lctx.get()), start[1] - 1) << "memory untouched";
    EXPECT_EQ(s.enc_trig.calls, 0) << "nothing encoded";
    EXPECT_EQ(s.dec_trig.calls, 0) << "nothing decoded";
    EXPECT_STREQ(r.message, "");
    resume_and_check(s, r);
}

TEST_P(Mtmd, CancelInsideEncodeDecodesNothingOfThatChunk) {
    // Encode asks of one media chunk, counted on an uninterrupted run.
    setup c(k.mmproj);
    llama_cancel_mtmd_result r;
    ASSERT_EQ(c.eval(chunks.get(), 0, 0, k.n_batch, &r), LLAMA_CANCEL_OK) << r.message;
    const int per_encode = c.enc_trig.calls / 2;
    ASSERT_GT(per_encode, 10);

    setup s(k.mmproj);
    s.enc_trig.at = per_encode + per_encode / 2; // in the middle of the second media chunk's encode
    ASSERT_EQ(s.eval(chunks.get(), 0, 0, k.n_batch, &r), LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_EQ(r.n_chunks_done, 3);
    EXPECT_EQ(r.n_past, start[3]);
    EXPECT_EQ(pos_max(s.lctx.get()), start[3] - 1) << "nothing of the stopped chunk in memory";
    EXPECT_TRUE(llama_cancel_hook_stopped(s.enc_hook.get())) << "the hook stopped the clip graph";
    EXPECT_EQ(static_cast<int>(s.dec_trig.graph_ends.size()), graphs_before(3)) << "its embeddings were not decoded";
    EXPECT_LT(s.enc_trig.calls, 2 * per_encode) << "the encode stopped early";
    // The chunk's snapshot is the decode hook's and counts in its stats (issue 30): on recurrent
    // state the stop puts one back; no decode of the stopped chunk ran to put back its own.
    const llama_model * m = llama_get_model(s.lctx.get());
    const bool state = llama_model_is_recurrent(m) || llama_model_is_hybrid(m);
    const llama_cancel_snapshot_stats st = llama_cancel_hook_get_snapshot_stats(s.dec_hook.get());
    EXPECT_EQ(st.restores, state ? 1u : 0u) << "the chunk's snapshot, put back once";
    if (state) {
        EXPECT_GE(st.snapshots, 4u) << "one per chunk at least";
    }
    resume_and_check(s, r);
}

// The evaluated sequence's own byte among per-sequence bytes stops the evaluation as the call's
// byte does (inside an encode here, and on entry); another sequence's byte changes nothing.
TEST_P(Mtmd, TheSequencesOwnByteStopsIt) {
    setup c(k.mmproj);
    llama_cancel_mtmd_result r;
    ASSERT_EQ(c.eval(chunks.get(), 0, 0, k.n_batch, &r), LLAMA_CANCEL_OK) << r.message;
    const int per_encode = c.enc_trig.calls / 2;

    int8_t seq0 = 0, seq1 = 1; // sequence 1's byte is set: it is not the one evaluated
    const int8_t * seq_bytes[2] = {&seq0, &seq1};
    const auto eval = [&](setup & s, int32_t first, llama_pos n_past) {
        llama_cancel_mtmd_params p = s.params(k.n_batch);
        p.byte        = nullptr;
        p.seq_bytes   = seq_bytes;
        p.n_seq       = 2;
        return mtmd_test::eval_chunks(s.mctx.get(), s.enc_hook.get(), s.lctx.get(), chunks.get(), first,
                                             n_past, &p, &r);
    };
    {
        setup s(k.mmproj);
        ASSERT_EQ(eval(s, 0, 0), LLAMA_CANCEL_OK) << r.message;
        EXPECT_TRUE(same(common::last_logits(s.lctx.get()), common::last_logits(c.lctx.get())));
    }
    setup s(k.mmproj);
    s.enc_trig.byte = &seq0;
    s.enc_trig.at   = per_encode + per_encode / 2; // inside the second media chunk's encode
    ASSERT_EQ(eval(s, 0, 0), LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_EQ(r.n_chunks_done, 3);
    EXPECT_EQ(pos_max(s.lctx.get()), start[3] - 1) << "nothing of the stopped chunk in memory";
    EXPECT_TRUE(llama_cancel_hook_stopped(s.enc_hook.get()));
    EXPECT_LT(s.enc_trig.calls, 2 * per_encode) << "the encode stopped early";
    const int encoded = s.enc_trig.calls;
    ASSERT_EQ(eval(s, r.n_chunks_done, r.n_past), LLAMA_CANCEL_CANCELLED) << "still set on entry";
    EXPECT_EQ(s.enc_trig.calls, encoded) << "nothing encoded";
    EXPECT_EQ(pos_max(s.lctx.get()), start[3] - 1);
}

// The token loop after a multimodal prompt: uninterrupted, then stopped inside the second encode and
// resumed from the chunk it reports; both generate the same tokens (greedy).
TEST_P(Mtmd, GenerateAfterMediaPromptCancelsAndResumes) {
    setup c(k.mmproj);
    llama_cancel_generate_params gp = llama_cancel_generate_default_params();
    gp.byte      = &c.byte;
    gp.hook      = c.dec_hook.get();
    gp.n_predict = 6;
    std::vector<llama_token> want_tokens(6, -1), got(6, -1);
    mtmd_test::generate_mtmd_result r;
    ASSERT_EQ(mtmd_test::generate_mtmd(c.mctx.get(), c.enc_hook.get(), c.lctx.get(), chunks.get(), 0, 0, &gp,
                                         want_tokens.data(), 6, &r),
              LLAMA_CANCEL_OK)
        << r.message;
    EXPECT_EQ(r.n_chunks_done, n_chunks);
    EXPECT_EQ(r.n_prompt_committed, want_n_past);
    EXPECT_EQ(r.n_generated, 6);
    EXPECT_EQ(r.n_past, want_n_past + 6);
    const int per_encode = c.enc_trig.calls / 2;

    setup s(k.mmproj);
    gp.byte          = &s.byte;
    gp.hook          = s.dec_hook.get();
    s.enc_trig.at    = per_encode + per_encode / 2;
    ASSERT_EQ(mtmd_test::generate_mtmd(s.mctx.get(), s.enc_hook.get(), s.lctx.get(), chunks.get(), 0, 0, &gp,
                                         got.data(), 6, &r),
              LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.stop_reason, LLAMA_CANCEL_STOP_CANCELLED);
    EXPECT_EQ(r.n_chunks_done, 3);
    EXPECT_EQ(r.n_past, start[3]);
    EXPECT_EQ(r.n_generated, 0);
    s.rearm();
    ASSERT_EQ(mtmd_test::generate_mtmd(s.mctx.get(), s.enc_hook.get(), s.lctx.get(), chunks.get(), r.n_chunks_done, r.n_past,
                                         &gp, got.data(), 6, &r),
              LLAMA_CANCEL_OK)
        << r.message;
    EXPECT_EQ(got, want_tokens) << "resumed generation differs";
}

// max_stop_ms of llama_cancel_generate_mtmd reaches the chunk decodes (issue 22): a budget no node
// can meet (1 microsecond) cuts every decode after the 16-token probe to one token, so the prompt's
// decodes take more graphs than without a budget (the decode hook's chain counts them). Decodes of
// the context's n_batch (64), so that a call holds more than the probe.
TEST_P(Mtmd, GenerateBudgetReachesTheChunkDecodes) {
    llama_cancel_generate_params gp = llama_cancel_generate_default_params();
    gp.n_predict = 2;
    gp.n_batch   = 64;
    std::vector<llama_token> out(2, -1);
    mtmd_test::generate_mtmd_result r;
    setup plain(k.mmproj);
    gp.byte = &plain.byte;
    gp.hook = plain.dec_hook.get();
    ASSERT_EQ(mtmd_test::generate_mtmd(plain.mctx.get(), plain.enc_hook.get(), plain.lctx.get(), chunks.get(), 0, 0,
                                         &gp, out.data(), 2, &r),
              LLAMA_CANCEL_OK) << r.message;
    const size_t graphs_plain = plain.dec_trig.graph_ends.size();
    ASSERT_GT(graphs_plain, 0u);

    setup budget(k.mmproj);
    gp.byte        = &budget.byte;
    gp.hook        = budget.dec_hook.get();
    gp.max_stop_ms = 1e-3f;
    ASSERT_EQ(mtmd_test::generate_mtmd(budget.mctx.get(), budget.enc_hook.get(), budget.lctx.get(), chunks.get(), 0,
                                         0, &gp, out.data(), 2, &r),
              LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_chunks_done, n_chunks);
    EXPECT_EQ(r.n_prompt_committed, want_n_past);
    EXPECT_GT(budget.dec_trig.graph_ends.size(), graphs_plain)
        << "the budget did not reach the chunk decodes: they went in n_batch slices";
}

TEST_P(Mtmd, MtmdContextEncodesCorrectlyAfterACancel) {
    auto fresh = make_mtmd(k.mmproj);
    ASSERT_EQ(mtmd_encode_chunk(fresh.get(), chunk_at(1)), 0);
    const auto ref = embeddings(fresh.get(), chunk_at(1));

    setup s(k.mmproj);
    s.enc_trig.at = 12;
    llama_cancel_mtmd_result r;
    ASSERT_EQ(s.eval(chunks.get(), 1, 0, k.n_batch, &r), LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.n_chunks_done, 1);
    EXPECT_FALSE(same(embeddings(s.mctx.get(), chunk_at(1)), ref)) << "the stopped encode left garbage";

    s.rearm();
    llama_cancel_hook_reset(s.enc_hook.get());
    ASSERT_EQ(mtmd_encode_chunk(s.mctx.get(), chunk_at(1)), 0);
    EXPECT_TRUE(same(embeddings(s.mctx.get(), chunk_at(1)), ref)) << "the reused mtmd context encodes as a fresh one";
}

class MtmdDecodeCancel : public Mtmd {
  protected:
    // Stops the decode graph of slice `slice` of chunk `chunk` in its middle.
    void cancel_in(int32_t chunk, int slice) {
        const std::vector<int> ends = count_graph_ends();
        ASSERT_EQ(static_cast<int>(ends.size()), graphs_before(n_chunks));
        const int g = graphs_before(chunk) + slice;
        ASSERT_LT(g, graphs_before(chunk + 1)) << "the chunk has that many slices";
        const int begin = g > 0 ? ends[g - 1] : 0;

        setup s(k.mmproj);
        s.dec_trig.at = begin + (ends[g] - begin) / 2;
        llama_cancel_mtmd_result r;
        ASSERT_EQ(s.eval(chunks.get(), 0, 0, k.n_batch, &r), LLAMA_CANCEL_CANCELLED) << r.message;
        EXPECT_EQ(r.n_chunks_done, chunk);
        EXPECT_EQ(r.n_past, start[chunk]);
        EXPECT_EQ(pos_max(s.lctx.get()), start[chunk] - 1) << "the slices already decoded are rolled back too";
        EXPECT_TRUE(llama_cancel_hook_stopped(s.dec_hook.get()));
        EXPECT_EQ(static_cast<int>(s.dec_trig.graph_ends.size()), g) << "stopped in graph " << g;
        resume_and_check(s, r);
    }
};

TEST_P(MtmdDecodeCancel, InsideEmbeddingDecodeRollsBackTheChunk) {
    cancel_in(3, 1); // second slice of the second media chunk: its first slice was already in memory
}

TEST_P(MtmdDecodeCancel, InsideTextDecodeRollsBackTheChunk) {
    const int n = static_cast<int>(mtmd_input_chunk_get_n_tokens(chunk_at(2)));
    ASSERT_GT(n, k.n_batch) << "the middle text chunk needs two slices";
    cancel_in(2, 1);
}

TEST_P(Mtmd, CancelBetweenChunks) {
    // A text context without the hook: a plain trigger as cb_eval stores the byte after the last
    // node of the first media chunk's last decode graph, which completes; the byte is then seen
    // between chunks. (With the hook, the hook stops the graph at that node instead.)
    fixtures::node_trigger count;
    {
        auto mctx = make_mtmd(k.mmproj);
        auto lctx = make_lctx(fixtures::node_trigger::eval_cb, &count);
        llama_cancel_mtmd_params p = llama_cancel_mtmd_default_params();
        p.n_batch = k.n_batch;
        llama_cancel_mtmd_result r;
        ASSERT_EQ(mtmd_test::eval_chunks(mctx.get(), nullptr, lctx.get(), chunks.get(), 0, 0, &p, &r),
                  LLAMA_CANCEL_OK)
            << r.message;
    }
    const int g = graphs_before(2) - 1; // last graph of chunk 1
    ASSERT_LT(g, static_cast<int>(count.graph_ends.size()));

    int8_t  byte = 0;
    fixtures::node_trigger trig;
    trig.byte = &byte;
    trig.at   = count.graph_ends[g];
    fixtures::node_trigger enc;
    auto    enc_hook = fixtures::make_hook(&enc);
    auto    mctx     = make_mtmd(k.mmproj, llama_cancel_hook_eval_callback, enc_hook.get());
    auto    lctx     = make_lctx(fixtures::node_trigger::eval_cb, &trig);
    llama_cancel_mtmd_params p = llama_cancel_mtmd_default_params();
    p.byte    = &byte;
    p.n_batch = k.n_batch;
    llama_cancel_mtmd_result r;
    ASSERT_EQ(mtmd_test::eval_chunks(mctx.get(), enc_hook.get(), lctx.get(), chunks.get(), 0, 0, &p, &r),
              LLAMA_CANCEL_CANCELLED)
        << r.message;
    EXPECT_EQ(r.n_chunks_done, 2) << "chunk 1 completed, chunk 2 never started";
    EXPECT_EQ(r.n_past, start[2]);
    EXPECT_EQ(pos_max(lctx.get()), start[2] - 1);
    EXPECT_EQ(trig.calls, count.graph_ends[g]) << "no decode after the stop";

    byte    = 0;
    trig.at = -1;
    llama_cancel_mtmd_result r2;
    ASSERT_EQ(mtmd_test::eval_chunks(mctx.get(), enc_hook.get(), lctx.get(), chunks.get(), r.n_chunks_done,
                                            r.n_past, &p, &r2),
              LLAMA_CANCEL_OK)
        << r2.message;
    EXPECT_EQ(r2.n_past, want_n_past);
    EXPECT_TRUE(same(common::last_logits(lctx.get()), want)) << "resumed logits differ from an uninterrupted run";
}

TEST_P(Mtmd, CancelTwiceThenResume) {
    // Encode of chunk 1, then decode of chunk 3, then finish: bit-identical at the end.
    setup c(k.mmproj);
    llama_cancel_mtmd_result r;
    ASSERT_EQ(c.eval(chunks.get(), 0, 0, k.n_batch, &r), LLAMA_CANCEL_OK) << r.message;
    const std::vector<int> ends = c.dec_trig.graph_ends;

    setup s(k.mmproj);
    s.enc_trig.at = 5;
    ASSERT_EQ(s.eval(chunks.get(), 0, 0, k.n_batch, &r), LLAMA_CANCEL_CANCELLED);
    ASSERT_EQ(r.n_chunks_done, 1);

    s.rearm();
    // The resumed call starts at chunk 1: its asks count from there. Late in chunk 3's first slice:
    const int base = ends[graphs_before(1) - 1];
    s.dec_trig.at  = ends[graphs_before(3)] - base - 3;
    ASSERT_EQ(s.eval(chunks.get(), r.n_chunks_done, r.n_past, k.n_batch, &r), LLAMA_CANCEL_CANCELLED) << r.message;
    ASSERT_EQ(r.n_chunks_done, 3);
    EXPECT_EQ(pos_max(s.lctx.get()), start[3] - 1);
    resume_and_check(s, r);
}

// A prompt that ends with a media chunk (audio: nothing follows it; vision: "<end_of_image>"):
// the output of the last token is asked for whatever its kind.
TEST_P(Mtmd, LogitsForTheLastTokenOfAMediaChunk) {
    setup s(k.mmproj);
    const std::string prompt = std::string("Only this: ") + mtmd_default_marker();
    mtmd_bitmap * bm = fixtures::make_media(k.audio, 3);
    const mtmd_bitmap * bitmaps[1] = {bm};
    mtmd_input_text text{prompt.c_str(), prompt.size(), true, true};
    chunks_ptr c(mtmd_input_chunks_init());
    ASSERT_EQ(mtmd_tokenize(s.mctx.get(), c.get(), &text, bitmaps, 1), 0);
    mtmd_bitmap_free(bm);
    const size_t n = mtmd_input_chunks_size(c.get());
    const auto last_type = mtmd_input_chunk_get_type(mtmd_input_chunks_get(c.get(), n - 1));
    EXPECT_EQ(last_type, k.audio ? MTMD_INPUT_CHUNK_TYPE_AUDIO : MTMD_INPUT_CHUNK_TYPE_TEXT);
    llama_cancel_mtmd_result r;
    ASSERT_EQ(s.eval(c.get(), 0, 0, k.n_batch, &r), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_past, mtmd_helper_get_n_pos(c.get()));
    ASSERT_NE(llama_get_logits_ith(s.lctx.get(), -1), nullptr);
    EXPECT_FALSE(common::last_logits(s.lctx.get()).empty());
}

TEST_P(Mtmd, ClearErrors) {
    setup s(k.mmproj);
    llama_cancel_mtmd_params p = s.params(k.n_batch);
    llama_cancel_mtmd_result r;
    auto err = [&](mtmd_context * m, llama_context * l, const mtmd_input_chunks * c, int32_t first, const char * what) {
        EXPECT_EQ(mtmd_test::eval_chunks(m, s.enc_hook.get(), l, c, first, 0, &p, &r), LLAMA_CANCEL_ERROR);
        EXPECT_EQ(r.status, LLAMA_CANCEL_ERROR);
        EXPECT_NE(std::string(r.message).find(what), std::string::npos) << r.message;
    };
    err(nullptr, s.lctx.get(), chunks.get(), 0, "mctx is NULL");
    err(s.mctx.get(), nullptr, chunks.get(), 0, "lctx is NULL");
    err(s.mctx.get(), s.lctx.get(), nullptr, 0, "chunks is NULL");
    err(s.mctx.get(), s.lctx.get(), chunks.get(), n_chunks + 1, "first_chunk 6 is outside [0, 5]");
    p.seq_id = 3;
    err(s.mctx.get(), s.lctx.get(), chunks.get(), 0, "seq_id 3");
    p.seq_id  = 0;
    p.n_batch = 65;
    err(s.mctx.get(), s.lctx.get(), chunks.get(), 0, "n_batch 65");
    p.n_batch = k.n_batch;
    p.n_seq = -1;
    err(s.mctx.get(), s.lctx.get(), chunks.get(), 0, "n_seq");
    p.n_seq = 0;
    EXPECT_EQ(pos_max(s.lctx.get()), -1);
    EXPECT_EQ(s.enc_trig.calls + s.dec_trig.calls, 0);

    // first_chunk == the number of chunks: nothing to do.
    EXPECT_EQ(mtmd_test::eval_chunks(s.mctx.get(), s.enc_hook.get(), s.lctx.get(), chunks.get(), n_chunks, 7,
                                            &p, &r),
              LLAMA_CANCEL_OK);
    EXPECT_EQ(r.n_chunks_done, n_chunks);
    EXPECT_EQ(r.n_past, 7);
    EXPECT_FALSE(mtmd_decode_use_mrope(s.mctx.get())) << "M-RoPE families are covered by test_mtmd_mrope";
}

INSTANTIATE_TEST_SUITE_P(Kinds, Mtmd, ::testing::Values("vision", "audio"),
                         [](const ::testing::TestParamInfo<std::string> & i) { return i.param; });
INSTANTIATE_TEST_SUITE_P(Kinds, MtmdDecodeCancel, ::testing::Values("vision", "audio"),
                         [](const ::testing::TestParamInfo<std::string> & i) { return i.param; });

// reach and mtmd_reach: where the evaluation read the byte, the worst of each context's graphs.
// Without an eval callback of ours, the decodes' byte is read by the CPU's abort callback alone and
// the encodes' between chunks only; with the stateless name bound to the mtmd context, inside its
// encodes.
TEST_P(Mtmd, TheResultSaysWhereEachContextReadTheByte) {
    int8_t byte = 0;
    llama_cancel_mtmd_params p = llama_cancel_mtmd_default_params();
    p.byte    = &byte;
    p.n_batch = k.n_batch;
    llama_cancel_mtmd_result r;
    {
        auto mctx = make_mtmd(k.mmproj);
        auto lctx = make_lctx();
        r.reach = r.mtmd_reach = -1;
        ASSERT_EQ(llama_cancel_mtmd_eval_chunks(mctx.get(), lctx.get(), chunks.get(), 0, 0, &p, &r), LLAMA_CANCEL_OK)
            << r.message;
        EXPECT_EQ(r.reach, LLAMA_CANCEL_REACH_CPU) << "no hook on the llama context: its CPU nodes only";
        EXPECT_EQ(r.mtmd_reach, LLAMA_CANCEL_REACH_CALLS) << "no eval callback on the mtmd context: between chunks";
    }
    auto mctx = make_mtmd(k.mmproj, llama_cancel_eval_callback, &byte);
    auto lctx = make_lctx(llama_cancel_eval_callback, &byte);
    r.reach = r.mtmd_reach = -1;
    ASSERT_EQ(llama_cancel_mtmd_eval_chunks(mctx.get(), lctx.get(), chunks.get(), 0, 0, &p, &r), LLAMA_CANCEL_OK)
        << r.message;
    EXPECT_EQ(r.reach, LLAMA_CANCEL_REACH_GRAPH) << "the stateless name on the llama context";
    EXPECT_EQ(r.mtmd_reach, LLAMA_CANCEL_REACH_GRAPH) << "the stateless name on the mtmd context";
}
