// llama_cancel_mtmd_eval_chunks_ext with LLAMA_CANCEL_MTMD_BATCH_ENCODE (issue 31): consecutive
// same-size image chunks encoded by one mtmd_batch_encode, each then decoded as its own chunk. The
// projector is the synthetic InternVL one (scripts/make_mmproj.py --vision-projector internvl), whose
// clip graph batches: a 128x64 image is two 64x64 tiles and a thumbnail, three 16-token image chunks
// in a row. The prompt holds two such images: text, 3 images, text, 3 images, text (9 chunks, the
// batches [1, 4) and [5, 8)). Runs on the setup in LLAMA_CANCEL_BACKEND (the CPU when unset) with the
// small text model (LLAMA_CANCEL_SMALL_MODEL) and the projector in LLAMA_CANCEL_BATCH_MMPROJ.
//
// The reference of every batched run is upstream's way (mtmd-cli's): mtmd_batch_encode of each run,
// then mtmd_helper_decode_image_chunk per chunk, mtmd_helper_eval_chunk_single for text; on the CPU
// a batched image's embeddings equal its own encode's, so there it is also mtmd_helper_eval_chunks'
// result. Stops come from a callback chained behind the hooks at a counted node; no timing.
#include "fixtures.h"
#include "mtmd_calls.h"
#include "mtmd_media.h"

#include "llama-cancel.h"
#include "mtmd-helper.h"
#include "mtmd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

using fixtures::test_backend;

using mtmd_ptr   = mtmd::context_ptr;
using chunks_ptr = mtmd::input_chunks_ptr;
using batch_ptr  = mtmd::batch_ptr;

constexpr int32_t  k_n_batch  = 8; // an image chunk (16 tokens) takes two decodes
constexpr size_t   k_n_chunks = 9;
constexpr uint32_t k_batch    = LLAMA_CANCEL_MTMD_BATCH_ENCODE;

bool on_cpu() { return test_backend().name() == "cpu"; }

mtmd_ptr make_mtmd(ggml_backend_sched_eval_callback cb = nullptr, void * data = nullptr) {
    mtmd_helper_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    mtmd_context_params mp = mtmd_context_params_default();
    mp.use_gpu           = !on_cpu();
    mp.warmup            = false;
    mp.print_timings     = false;
    mp.n_threads         = 2;
    mp.cb_eval           = cb;
    mp.cb_eval_user_data = data;
    return mtmd_ptr(mtmd_init_from_file(fixtures::env("LLAMA_CANCEL_BATCH_MMPROJ").c_str(),
                                        test_backend().model.get(), mp));
}

common::context_ptr make_lctx(llama_cancel_hook * hook = nullptr) {
    return fixtures::make_backend_context(test_backend().model.get(), hook,
                                          fixtures::context_options(k_n_batch, k_n_batch));
}

bool is_text(const mtmd_input_chunk * c) { return mtmd_input_chunk_get_type(c) == MTMD_INPUT_CHUNK_TYPE_TEXT; }

bool same(const std::vector<float> & a, const std::vector<float> & b) {
    if (a.empty() || b.empty()) {
        ADD_FAILURE() << "an output to compare is missing (" << a.size() << " and " << b.size() << " floats)";
        return false;
    }
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Upstream's evaluation of chunks [0, n) on a plain context: `batched`, each run of media chunks
// through one mtmd_batch_encode (mtmd-cli's loop: a batch reaches past n as in the whole run's);
// otherwise mtmd_helper_eval_chunk_single per chunk, which encodes each on its own. Logits for the
// last chunk when n is all of them.
void upstream_eval(mtmd_context * mctx, llama_context * lctx, const mtmd_input_chunks * chunks, size_t n,
                   bool batched) {
    llama_pos n_past = 0;
    batch_ptr batch;
    for (size_t i = 0; i < n; ++i) {
        const mtmd_input_chunk * c    = mtmd_input_chunks_get(chunks, i);
        const bool               last = i + 1 == k_n_chunks;
        if (!batched || is_text(c)) {
            ASSERT_EQ(mtmd_helper_eval_chunk_single(mctx, lctx, c, n_past, 0, k_n_batch, last, &n_past), 0);
            continue;
        }
        float * embd = batch ? mtmd_batch_get_output_embd(batch.get(), c) : nullptr;
        if (embd == nullptr) {
            batch.reset(mtmd_batch_init(mctx));
            ASSERT_EQ(mtmd_batch_add_chunk(batch.get(), c), 0);
            for (size_t j = i + 1; j < k_n_chunks; ++j) {
                const mtmd_input_chunk * next = mtmd_input_chunks_get(chunks, j);
                if (is_text(next) || mtmd_batch_add_chunk(batch.get(), next) != 0) {
                    break;
                }
            }
            ASSERT_EQ(mtmd_batch_encode(batch.get()), 0);
            embd = mtmd_batch_get_output_embd(batch.get(), c);
        }
        ASSERT_NE(embd, nullptr);
        ASSERT_EQ(mtmd_helper_decode_image_chunk(mctx, lctx, c, embd, n_past, 0, k_n_batch, &n_past, nullptr, nullptr),
                  0);
    }
}

// The two hooks, each chaining a trigger that stores the byte at a chosen node, and the contexts.
struct setup {
    fixtures::node_trigger enc_trig, dec_trig;
    int8_t                 byte = 0;
    common::hook_ptr       enc_hook, dec_hook;
    mtmd_ptr               mctx;
    common::context_ptr    lctx;

    setup() {
        enc_trig.byte = &byte;
        dec_trig.byte = &byte;
        enc_hook      = fixtures::make_hook(&enc_trig);
        dec_hook      = fixtures::make_hook(&dec_trig);
        mctx          = make_mtmd(llama_cancel_hook_eval_callback, enc_hook.get());
        lctx          = make_lctx(dec_hook.get());
    }

    int32_t eval(const mtmd_input_chunks * chunks, int32_t first, llama_pos n_past, uint32_t options,
                 llama_cancel_mtmd_result * r) {
        llama_cancel_mtmd_params p = llama_cancel_mtmd_default_params();
        p.byte        = &byte;
        p.hook = dec_hook.get();
        p.n_batch     = k_n_batch;
        return mtmd_test::eval_chunks(mctx.get(), enc_hook.get(), lctx.get(), chunks, first, n_past, &p, r, options);
    }

    void rearm() {
        byte = 0;
        enc_trig.reset();
        dec_trig.reset();
    }
};

} // namespace

class MtmdBatch : public ::testing::Test {
  protected:
    void SetUp() override {
        auto mctx = make_mtmd();
        ASSERT_NE(mctx, nullptr) << "mtmd cannot load " << fixtures::env("LLAMA_CANCEL_BATCH_MMPROJ");
        chunks.reset(mtmd_input_chunks_init());
        ASSERT_EQ(fixtures::tokenize_two_media(mctx.get(), chunks.get(), false, 128, 64, 128, 64), 0);
        ASSERT_EQ(mtmd_input_chunks_size(chunks.get()), k_n_chunks) << "text, 3 images, text, 3 images, text";
        for (size_t i = 0; i < k_n_chunks; ++i) {
            ASSERT_EQ(is_text(chunk_at(i)), i % 4 == 0) << "chunk " << i;
            start.push_back(i == 0 ? 0 : start[i - 1] + mtmd_input_chunk_get_n_pos(chunk_at(i - 1)));
        }
        ASSERT_GT(static_cast<int32_t>(mtmd_input_chunk_get_n_tokens(chunk_at(1))), k_n_batch);
        // The projector batches them: the premise of every test here.
        batch_ptr b(mtmd_batch_init(mctx.get()));
        for (size_t i = 1; i < 4; ++i) {
            ASSERT_EQ(mtmd_batch_add_chunk(b.get(), chunk_at(i)), 0) << "chunk " << i << " not batched";
        }

        auto lctx = make_lctx();
        upstream_eval(mctx.get(), lctx.get(), chunks.get(), k_n_chunks, true);
        want = common::last_logits(lctx.get());
        ASSERT_FALSE(want.empty());
        want_n_past = mtmd_helper_get_n_pos(chunks.get());

        auto      plain = make_lctx();
        llama_pos n_past = 0;
        ASSERT_EQ(mtmd_helper_eval_chunks(mctx.get(), plain.get(), chunks.get(), 0, 0, k_n_batch, true, &n_past), 0);
        want_single = common::last_logits(plain.get());
    }

    const mtmd_input_chunk * chunk_at(size_t i) const { return mtmd_input_chunks_get(chunks.get(), i); }

    // Sequence 0's memory after upstream's batched evaluation of chunks [0, n).
    std::vector<uint8_t> memory_after(size_t n) {
        auto mctx = make_mtmd();
        auto lctx = make_lctx();
        upstream_eval(mctx.get(), lctx.get(), chunks.get(), n, true);
        return fixtures::seq_state(lctx.get(), 0);
    }

    // Decode graphs (one per n_batch slice) of chunks [0, i).
    int graphs_before(size_t i) const {
        int g = 0;
        for (size_t c = 0; c < i; ++c) {
            g += (static_cast<int>(mtmd_input_chunk_get_n_tokens(chunk_at(c))) + k_n_batch - 1) / k_n_batch;
        }
        return g;
    }

    // Encode asks and decode graph ends of an uninterrupted batched run.
    void count(int * encode_asks, std::vector<int> * graph_ends) {
        setup c;
        llama_cancel_mtmd_result r;
        ASSERT_EQ(c.eval(chunks.get(), 0, 0, k_batch, &r), LLAMA_CANCEL_OK) << r.message;
        *encode_asks = c.enc_trig.calls;
        *graph_ends  = c.dec_trig.graph_ends;
        ASSERT_EQ(static_cast<int>(graph_ends->size()), graphs_before(k_n_chunks));
    }

    void resume_and_check(setup & s, const llama_cancel_mtmd_result & r) {
        s.rearm();
        llama_cancel_mtmd_result r2;
        ASSERT_EQ(s.eval(chunks.get(), r.n_chunks_done, r.n_past, k_batch, &r2), LLAMA_CANCEL_OK) << r2.message;
        EXPECT_EQ(r2.n_chunks_done, static_cast<int32_t>(k_n_chunks));
        EXPECT_EQ(r2.n_past, want_n_past);
        EXPECT_EQ(fixtures::pos_max(s.lctx.get()), want_n_past - 1);
        EXPECT_TRUE(same(common::last_logits(s.lctx.get()), want)) << "resumed logits differ from an uninterrupted run";
    }

    chunks_ptr             chunks;
    std::vector<llama_pos> start; // first position of each chunk
    llama_pos              want_n_past = 0;
    std::vector<float>     want;        // upstream's batched evaluation
    std::vector<float>     want_single; // mtmd_helper_eval_chunks (one encode per chunk)
};

// The byte at 0: upstream's batched logits; two clip graphs instead of six; on the CPU the same
// logits as the unbatched evaluation (a batched image's embeddings equal its own encode's there).
TEST_F(MtmdBatch, ByteAtZeroMatchesUpstreamsBatchedEvaluation) {
    setup s;
    llama_cancel_mtmd_result r;
    ASSERT_EQ(s.eval(chunks.get(), 0, 0, k_batch, &r), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_chunks_done, static_cast<int32_t>(k_n_chunks));
    EXPECT_EQ(r.n_past, want_n_past);
    EXPECT_EQ(fixtures::pos_max(s.lctx.get()), want_n_past - 1);
    EXPECT_TRUE(same(common::last_logits(s.lctx.get()), want)) << "logits differ from upstream's batched evaluation";
    EXPECT_EQ(static_cast<int>(s.dec_trig.graph_ends.size()), graphs_before(k_n_chunks)) << "each chunk decoded";

    setup single;
    ASSERT_EQ(single.eval(chunks.get(), 0, 0, 0, &r), LLAMA_CANCEL_OK) << r.message;
    if (on_cpu()) { // elsewhere the checkpoints of the hook bound to mctx may move a clip graph's last bits
        EXPECT_TRUE(same(common::last_logits(single.lctx.get()), want_single)) << "options 0: the unbatched evaluation";
    }
    EXPECT_LT(3 * s.enc_trig.calls, 2 * single.enc_trig.calls)
        << "batched: 2 clip graphs of 3 images, not 6 of one (" << s.enc_trig.calls << " and "
        << single.enc_trig.calls << " asks)";
    const bool equal = same(want, want_single);
    std::printf("%s: batched and single encodes give %s logits\n", test_backend().name().c_str(),
                equal ? "the same" : "different");
    if (on_cpu()) {
        EXPECT_TRUE(equal) << "on the CPU a batched encode gives each image its own encode's embeddings";
    }
}

// A stop inside the first batch's clip graph: nothing of the batch decoded, memory holds chunk 0
// exactly, the resume re-forms the same batch and gives the uninterrupted logits.
TEST_F(MtmdBatch, StopInsideBatchedEncodeKeepsTheChunksBefore) {
    int              asks = 0;
    std::vector<int> ends;
    ASSERT_NO_FATAL_FAILURE(count(&asks, &ends));
    const int per_batch = asks / 2;
    ASSERT_GT(per_batch, 10);

    setup s;
    s.enc_trig.at = per_batch / 2;
    llama_cancel_mtmd_result r;
    ASSERT_EQ(s.eval(chunks.get(), 0, 0, k_batch, &r), LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_EQ(r.n_chunks_done, 1) << "the batch's first chunk";
    EXPECT_EQ(r.n_past, start[1]);
    EXPECT_EQ(fixtures::pos_max(s.lctx.get()), start[1] - 1);
    EXPECT_TRUE(llama_cancel_hook_stopped(s.enc_hook.get())) << "the hook stopped the batched clip graph";
    EXPECT_LT(s.enc_trig.calls, per_batch) << "the encode stopped early";
    EXPECT_EQ(static_cast<int>(s.dec_trig.graph_ends.size()), graphs_before(1)) << "no embedding of it decoded";
    EXPECT_EQ(fixtures::seq_state(s.lctx.get(), 0), memory_after(1)) << "memory differs from chunk 0 alone";
    resume_and_check(s, r);
}

// A chained cb_eval that stops the batched clip graph at ask number `at` (it returns false there),
// with the byte never set: the call still reports the stop, and the garbage embeddings of the
// batch are never decoded (nothing else would stop their decode).
struct chain_stop {
    int        calls = 0;
    int        at    = -1;
    static bool cb(ggml_tensor *, bool ask, void * data) {
        auto * c = static_cast<chain_stop *>(data);
        return ask ? ++c->calls == c->at : false;
    }
};

TEST_F(MtmdBatch, ChainedStopInsideBatchedEncodeDecodesNothingOfTheBatch) {
    int              asks = 0;
    std::vector<int> ends;
    ASSERT_NO_FATAL_FAILURE(count(&asks, &ends));

    chain_stop           chain;
    fixtures::node_trigger dec;
    int8_t               byte     = 0;
    auto                 enc_hook = common::make_hook(chain_stop::cb, &chain);
    auto                 dec_hook = fixtures::make_hook(&dec);
    auto                 mctx     = make_mtmd(llama_cancel_hook_eval_callback, enc_hook.get());
    auto                 lctx     = make_lctx(dec_hook.get());
    llama_cancel_mtmd_params p = llama_cancel_mtmd_default_params();
    p.byte        = &byte;
    p.hook = dec_hook.get();
    p.n_batch     = k_n_batch;
    chain.at      = asks / 4; // inside the first batch's graph
    llama_cancel_mtmd_result r;
    ASSERT_EQ(mtmd_test::eval_chunks(mctx.get(), enc_hook.get(), lctx.get(), chunks.get(), 0, 0, &p, &r, k_batch),
              LLAMA_CANCEL_CANCELLED)
        << r.message;
    EXPECT_EQ(byte, 0);
    EXPECT_EQ(r.n_chunks_done, 1);
    EXPECT_EQ(static_cast<int>(dec.graph_ends.size()), graphs_before(1)) << "no embedding of the batch decoded";
    EXPECT_EQ(fixtures::seq_state(lctx.get(), 0), memory_after(1));

    chain.at = -1;
    ASSERT_EQ(mtmd_test::eval_chunks(mctx.get(), enc_hook.get(), lctx.get(), chunks.get(), r.n_chunks_done,
                                                r.n_past, &p, &r, k_batch),
              LLAMA_CANCEL_OK)
        << r.message;
    EXPECT_TRUE(same(common::last_logits(lctx.get()), want)) << "resumed logits differ from an uninterrupted run";
}

// The second batch's clip graph: the first image's three chunks and the text after them stay.
TEST_F(MtmdBatch, StopInsideSecondBatchedEncode) {
    int              asks = 0;
    std::vector<int> ends;
    ASSERT_NO_FATAL_FAILURE(count(&asks, &ends));
    const int per_batch = asks / 2;

    setup s;
    s.enc_trig.at = per_batch + per_batch / 2;
    llama_cancel_mtmd_result r;
    ASSERT_EQ(s.eval(chunks.get(), 0, 0, k_batch, &r), LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_EQ(r.n_chunks_done, 5);
    EXPECT_EQ(r.n_past, start[5]);
    EXPECT_EQ(fixtures::pos_max(s.lctx.get()), start[5] - 1);
    EXPECT_EQ(static_cast<int>(s.dec_trig.graph_ends.size()), graphs_before(5));
    EXPECT_EQ(fixtures::seq_state(s.lctx.get(), 0), memory_after(5)) << "memory differs from chunks 0-4 alone";
    resume_and_check(s, r);
}

// A stop in the second image chunk's decode (its second slice): the first image chunk of the batch
// stays, the second goes whole; the resume starts inside the batch, encodes that batch whole again
// (the same graph as the uninterrupted run's) and decodes from chunk 2.
TEST_F(MtmdBatch, StopInsideSecondImageDecodeKeepsTheFirst) {
    int              asks = 0;
    std::vector<int> ends;
    ASSERT_NO_FATAL_FAILURE(count(&asks, &ends));
    const int per_batch = asks / 2;
    const int g         = graphs_before(2) + 1;
    ASSERT_LT(g, graphs_before(3));

    setup s;
    s.dec_trig.at = ends[g - 1] + (ends[g] - ends[g - 1]) / 2;
    llama_cancel_mtmd_result r;
    ASSERT_EQ(s.eval(chunks.get(), 0, 0, k_batch, &r), LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_EQ(r.n_chunks_done, 2);
    EXPECT_EQ(r.n_past, start[2]);
    EXPECT_EQ(fixtures::pos_max(s.lctx.get()), start[2] - 1) << "the first slice of chunk 2 is rolled back too";
    EXPECT_TRUE(llama_cancel_hook_stopped(s.dec_hook.get()));
    EXPECT_EQ(static_cast<int>(s.dec_trig.graph_ends.size()), g) << "stopped in graph " << g;
    EXPECT_EQ(s.enc_trig.calls, per_batch) << "one batched encode";
    EXPECT_EQ(fixtures::seq_state(s.lctx.get(), 0), memory_after(2)) << "memory differs from chunks 0-1 alone";

    resume_and_check(s, r);
    EXPECT_EQ(s.enc_trig.calls, 2 * per_batch) << "the resume encodes the whole first batch again, then the second";
}

// A stop between two chunks of a batch: a text context without the hook, a plain trigger as its
// cb_eval storing the byte after the last node of chunk 1's last decode graph, which completes; the
// byte is seen before chunk 2. Chunk 1 stays; the resume from inside the batch gives the same logits.
TEST_F(MtmdBatch, StopBetweenChunksOfABatch) {
    const auto run = [&](fixtures::node_trigger & trig, int8_t * byte, int32_t first, llama_pos n_past,
                         common::context_ptr & lctx, mtmd_context * mctx, llama_cancel_hook * enc,
                         llama_cancel_mtmd_result * r) {
        if (!lctx) {
            lctx = fixtures::make_backend_context(test_backend().model.get(), nullptr,
                                                  fixtures::context_options(k_n_batch, k_n_batch, 1,
                                                                            fixtures::node_trigger::eval_cb, &trig));
        }
        llama_cancel_mtmd_params p = llama_cancel_mtmd_default_params();
        p.byte    = byte;
        p.n_batch = k_n_batch;
        return mtmd_test::eval_chunks(mctx, enc, lctx.get(), chunks.get(), first, n_past, &p, r, k_batch);
    };
    fixtures::node_trigger   count;
    llama_cancel_mtmd_result r;
    {
        common::context_ptr lctx;
        auto                mctx = make_mtmd();
        ASSERT_EQ(run(count, nullptr, 0, 0, lctx, mctx.get(), nullptr, &r), LLAMA_CANCEL_OK) << r.message;
    }
    const int g = graphs_before(2) - 1; // the last graph of chunk 1
    ASSERT_LT(g, static_cast<int>(count.graph_ends.size()));

    int8_t                 byte = 0;
    fixtures::node_trigger trig, enc;
    trig.byte     = &byte;
    trig.at       = count.graph_ends[g];
    auto enc_hook = fixtures::make_hook(&enc);
    auto mctx     = make_mtmd(llama_cancel_hook_eval_callback, enc_hook.get());
    common::context_ptr lctx;
    ASSERT_EQ(run(trig, &byte, 0, 0, lctx, mctx.get(), enc_hook.get(), &r), LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_EQ(r.n_chunks_done, 2) << "chunk 1 completed, chunk 2 never started";
    EXPECT_EQ(r.n_past, start[2]);
    EXPECT_EQ(fixtures::pos_max(lctx.get()), start[2] - 1);
    EXPECT_EQ(trig.calls, count.graph_ends[g]) << "no decode after the stop";

    byte    = 0;
    trig.at = -1;
    llama_cancel_mtmd_result r2;
    ASSERT_EQ(run(trig, &byte, r.n_chunks_done, r.n_past, lctx, mctx.get(), enc_hook.get(), &r2), LLAMA_CANCEL_OK)
        << r2.message;
    EXPECT_EQ(r2.n_past, want_n_past);
    EXPECT_TRUE(same(common::last_logits(lctx.get()), want)) << "resumed logits differ from an uninterrupted run";
}

// Options: unknown bits are an ERROR that touches nothing; 0 is llama_cancel_mtmd_eval_chunks.
TEST_F(MtmdBatch, UnknownOptionBitsAreAnError) {
    setup s;
    llama_cancel_mtmd_result r;
    EXPECT_EQ(s.eval(chunks.get(), 0, 0, k_batch | 2u, &r), LLAMA_CANCEL_ERROR);
    EXPECT_EQ(r.status, LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::string(r.message).find("unknown bits 0x2"), std::string::npos) << r.message;
    EXPECT_EQ(r.n_chunks_done, 0);
    EXPECT_EQ(fixtures::pos_max(s.lctx.get()), -1);
    EXPECT_EQ(s.enc_trig.calls + s.dec_trig.calls, 0) << "nothing encoded or decoded";

    llama_cancel_mtmd_params p = llama_cancel_mtmd_default_params();
    p.n_batch = k_n_batch;
    ASSERT_EQ(mtmd_test::eval_chunks(s.mctx.get(), s.enc_hook.get(), s.lctx.get(), chunks.get(), 0, 0, &p, &r),
              LLAMA_CANCEL_OK)
        << r.message;
    if (on_cpu()) {
        EXPECT_TRUE(same(common::last_logits(s.lctx.get()), want_single));
    }
}

// llama_cancel_generate_mtmd_ext passes its options to the prompt's evaluation (since 1.4): with
// BATCH_ENCODE the prompt is encoded as two batches (the batched run's asks), the first token is the
// argmax of upstream's batched logits; a stop inside the first batch generates nothing, leaves chunk 0
// exactly, and the resume with the same options generates the same tokens. Unknown bits: ERROR, nothing
// evaluated.
TEST_F(MtmdBatch, GenerateWithBatchEncodeCancelsAndResumes) {
    int              asks = 0;
    std::vector<int> ends;
    ASSERT_NO_FATAL_FAILURE(count(&asks, &ends));
    constexpr int32_t n_predict = 4;
    const auto gen = [&](setup & x, int32_t first, llama_pos n_past, uint32_t options, std::vector<llama_token> & out,
                         mtmd_test::generate_mtmd_result * r) {
        llama_cancel_generate_params gp = llama_cancel_generate_default_params();
        gp.byte      = &x.byte;
        gp.hook      = x.dec_hook.get();
        gp.n_batch   = k_n_batch;
        gp.n_predict = n_predict;
        out.assign(n_predict, -1);
        return mtmd_test::generate_mtmd(x.mctx.get(), x.enc_hook.get(), x.lctx.get(), chunks.get(), first, n_past,
                                              &gp, out.data(), n_predict, r, options);
    };
    setup                        c;
    std::vector<llama_token>     want_tokens, got;
    mtmd_test::generate_mtmd_result r;
    ASSERT_EQ(gen(c, 0, 0, k_batch, want_tokens, &r), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_chunks_done, static_cast<int32_t>(k_n_chunks));
    EXPECT_EQ(r.n_prompt_committed, want_n_past);
    EXPECT_EQ(r.n_generated, n_predict);
    EXPECT_EQ(r.n_past, want_n_past + n_predict);
    EXPECT_EQ(c.enc_trig.calls, asks) << "the prompt encoded as the batched evaluation's two clip graphs";
    const auto top = std::max_element(want.begin(), want.end()) - want.begin();
    EXPECT_EQ(want_tokens[0], static_cast<llama_token>(top)) << "the first token is upstream's batched argmax";

    setup s;
    s.enc_trig.at = asks / 4; // inside the first batch's clip graph
    ASSERT_EQ(gen(s, 0, 0, k_batch, got, &r), LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_EQ(r.stop_reason, LLAMA_CANCEL_STOP_CANCELLED);
    EXPECT_EQ(r.n_chunks_done, 1);
    EXPECT_EQ(r.n_past, start[1]);
    EXPECT_EQ(r.n_generated, 0);
    EXPECT_EQ(fixtures::seq_state(s.lctx.get(), 0), memory_after(1)) << "memory differs from chunk 0 alone";
    s.rearm();
    ASSERT_EQ(gen(s, r.n_chunks_done, r.n_past, k_batch, got, &r), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(got, want_tokens) << "resumed generation differs";

    setup e;
    EXPECT_EQ(gen(e, 0, 0, k_batch | 2u, got, &r), LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::string(r.message).find("unknown bits 0x2"), std::string::npos) << r.message;
    EXPECT_EQ(r.n_chunks_done, 0);
    EXPECT_EQ(r.n_past, 0);
    EXPECT_EQ(e.enc_trig.calls + e.dec_trig.calls, 0) << "nothing encoded or decoded";
}

// Another hook than the one bound to mctx: ERROR before the batch's embeddings are used.
TEST_F(MtmdBatch, WrongEncodeHookIsAnError) {
    setup s;
    auto other = fixtures::make_hook(nullptr);
    llama_cancel_mtmd_params p = llama_cancel_mtmd_default_params();
    p.n_batch = k_n_batch;
    llama_cancel_mtmd_result r;
    EXPECT_EQ(mtmd_test::eval_chunks(s.mctx.get(), other.get(), s.lctx.get(), chunks.get(), 0, 0, &p, &r, k_batch),
              LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::string(r.message).find("mtmd_hook is not the hook bound to mctx"), std::string::npos)
        << r.message;
    EXPECT_EQ(r.n_chunks_done, 1);
    EXPECT_EQ(fixtures::pos_max(s.lctx.get()), start[1] - 1);
}

namespace {

const auto * const g_environment = fixtures::add_backend_environment([] {
    fixtures::backend_environment_options o;
    o.model_env       = "LLAMA_CANCEL_SMALL_MODEL";
    o.model_what      = "the tests' small model (scripts/make_model.py)";
    o.default_backend = "cpu";
    return o;
}());

} // namespace
