// llama_cancel_mtmd_eval_chunks on synthetic projectors (vision: gemma3, audio: whisper + ultravox)
// next to the small text model, CPU backend.
//
// Each prompt holds two media items: text, media, text, media, text. Stops are triggered
// deterministically: a callback chained behind a llama_cancel_hook counts the nodes the scheduler
// asks about and stores the byte at a chosen one, in the clip encode or in a chosen decode graph;
// no test depends on timing.
#include "support.h"

#include "mtmd-helper.h"
#include "mtmd.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace {

llama_model * g_model = nullptr;

std::string env(const char * name) {
    const char * v = std::getenv(name);
    return v != nullptr ? v : "";
}

// Chained eval callback: counts asks, answers true at ask number `at` and stores the byte once that
// node is computed. Records the ask number of each decode graph's last node ("result_output").
struct trigger {
    int              asks = 0;
    int              at   = -1;
    int8_t *         flag = nullptr;
    std::vector<int> graph_ends;

    static bool cb(ggml_tensor * t, bool ask, void * data) {
        auto * tr = static_cast<trigger *>(data);
        if (ask) {
            ++tr->asks;
            if (std::strcmp(t->name, "result_output") == 0) {
                tr->graph_ends.push_back(tr->asks);
            }
            return tr->asks == tr->at;
        }
        if (tr->flag != nullptr) {
            __atomic_store_n(tr->flag, 1, __ATOMIC_RELAXED);
        }
        return true;
    }
    void reset() {
        asks = 0;
        at   = -1;
        graph_ends.clear();
    }
};

using lcs::hook_ptr;
struct mtmd_deleter { void operator()(mtmd_context * m) const { mtmd_free(m); } };
using mtmd_ptr   = std::unique_ptr<mtmd_context, mtmd_deleter>;
struct chunks_deleter { void operator()(mtmd_input_chunks * c) const { mtmd_input_chunks_free(c); } };
using chunks_ptr = std::unique_ptr<mtmd_input_chunks, chunks_deleter>;

hook_ptr make_hook(trigger * trig) {
    return lcs::make_hook(trig != nullptr ? trigger::cb : nullptr, trig);
}

// The host's side of binding: cb_eval and its user data in mtmd_context_params. Warmup off (speed).
mtmd_ptr make_mtmd(const std::string & path, ggml_backend_sched_eval_callback cb = nullptr, void * data = nullptr) {
    mtmd_context_params mp = mtmd_context_params_default();
    mp.use_gpu           = false;
    mp.warmup            = false;
    mp.print_timings     = false;
    mp.n_threads         = 2;
    mp.cb_eval           = cb;
    mp.cb_eval_user_data = data;
    return mtmd_ptr(mtmd_init_from_file(path.c_str(), g_model, mp));
}

// Text context; n_batch = n_ubatch = 64, so that each decode slice (n_batch of the call) is one ubatch.
lcs::context_ptr make_lctx(ggml_backend_sched_eval_callback cb = nullptr, void * data = nullptr) {
    lcs::context_options opt;
    opt.n_batch      = 64;
    opt.n_ubatch     = 64;
    opt.cb_eval      = cb;
    opt.cb_eval_data = data;
    return lcs::make_context(g_model, opt);
}

// Deterministic media: an RGB image or a second of 16 kHz audio, varied by `seed`.
mtmd_bitmap * make_bitmap(bool audio, uint32_t seed) {
    uint32_t x = seed * 2654435761u + 1;
    auto next = [&x] {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        return x;
    };
    if (audio) {
        std::vector<float> pcm(16000);
        for (auto & v : pcm) {
            v = 0.2f * (static_cast<float>(next() % 2001) / 1000.0f - 1.0f);
        }
        return mtmd_bitmap_init_from_audio(pcm.size(), pcm.data());
    }
    std::vector<unsigned char> px(64 * 64 * 3);
    for (auto & v : px) {
        v = static_cast<unsigned char>(next());
    }
    return mtmd_bitmap_init(64, 64, px.data());
}

chunks_ptr tokenize(mtmd_context * mctx, bool audio) {
    const std::string m      = mtmd_default_marker();
    const std::string prompt = "First item: " + m +
                               " and then, after a rather long pause to think it all over once more, here comes "
                               "the second one: " + m + " what are they?";
    mtmd_bitmap * a = make_bitmap(audio, 1);
    mtmd_bitmap * b = make_bitmap(audio, 2);
    const mtmd_bitmap * bitmaps[2] = {a, b};
    mtmd_input_text text{prompt.c_str(), prompt.size(), true, true};
    chunks_ptr chunks(mtmd_input_chunks_init());
    const int32_t ret = mtmd_tokenize(mctx, chunks.get(), &text, bitmaps, 2);
    mtmd_bitmap_free(a);
    mtmd_bitmap_free(b);
    EXPECT_EQ(ret, 0);
    return chunks;
}

llama_pos pos_max(llama_context * ctx) {
    return llama_memory_seq_pos_max(llama_get_memory(ctx), 0);
}

bool same(const std::vector<float> & a, const std::vector<float> & b) {
    return !a.empty() && a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<float> embeddings(mtmd_context * mctx, const mtmd_input_chunk * chunk) {
    const float * e = mtmd_get_output_embd(mctx);
    const size_t  n = static_cast<size_t>(llama_model_n_embd_inp(g_model)) * mtmd_input_chunk_get_n_tokens(chunk);
    return e != nullptr ? std::vector<float>(e, e + n) : std::vector<float>();
}

// Everything one run needs: an mtmd context with its encode hook, a text context with its decode
// hook, each hook chaining a trigger.
struct setup {
    trigger          enc_trig, dec_trig;
    int8_t           flag = 0;
    hook_ptr         enc_hook;
    hook_ptr         dec_hook;
    mtmd_ptr         mctx;
    lcs::context_ptr lctx;

    setup(const std::string & mmproj) {
        enc_trig.flag = &flag;
        dec_trig.flag = &flag;
        enc_hook      = make_hook(&enc_trig);
        dec_hook      = make_hook(&dec_trig);
        mctx          = make_mtmd(mmproj, llama_cancel_hook_eval_callback, enc_hook.get());
        llama_context_params cp = llama_context_default_params();
        llama_cancel_hook_bind(dec_hook.get(), &cp);
        lctx = make_lctx(cp.cb_eval, cp.cb_eval_user_data);
    }

    llama_cancel_mtmd_params params(int32_t n_batch) {
        llama_cancel_mtmd_params p = llama_cancel_mtmd_default_params();
        p.flag        = &flag;
        p.decode_hook = dec_hook.get();
        p.n_batch     = n_batch;
        return p;
    }

    int32_t eval(const mtmd_input_chunks * chunks, size_t first, llama_pos n_past, int32_t n_batch,
                 llama_cancel_mtmd_result * r) {
        const llama_cancel_mtmd_params p = params(n_batch);
        return llama_cancel_mtmd_eval_chunks(mctx.get(), enc_hook.get(), lctx.get(), chunks, first, n_past, &p, r);
    }

    // Clears the byte and the triggers, as a host does before resuming.
    void rearm() {
        flag = 0;
        enc_trig.reset();
        dec_trig.reset();
    }
};

struct kind_info {
    std::string name;
    bool        audio;
    std::string mmproj;
    int32_t     n_batch; // smaller than a media chunk: its decode takes several calls
};

} // namespace

class Mtmd : public ::testing::TestWithParam<std::string> {
  protected:
    static void SetUpTestSuite() {
        const std::string path = env("LLAMA_CANCEL_SMALL_MODEL");
        ASSERT_FALSE(path.empty()) << "set LLAMA_CANCEL_SMALL_MODEL (the tests' small model)";
        lcs::quiet_logs();
        mtmd_helper_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
        lcs::load_backends();
        g_model = lcs::load_model(path).release();
        ASSERT_NE(g_model, nullptr) << "cannot load " << path;
    }
    static void TearDownTestSuite() {
        llama_model_free(g_model);
        g_model = nullptr;
    }

    void SetUp() override {
        k.name    = GetParam();
        k.audio   = k.name == "audio";
        k.mmproj  = env(k.audio ? "LLAMA_CANCEL_AUDIO_MMPROJ" : "LLAMA_CANCEL_VISION_MMPROJ");
        k.n_batch = k.audio ? 16 : 8;
        ASSERT_FALSE(k.mmproj.empty()) << "set LLAMA_CANCEL_" << (k.audio ? "AUDIO" : "VISION") << "_MMPROJ";
        ASSERT_NE(g_model, nullptr);

        // Reference: upstream's helper on plain contexts, same n_batch.
        auto mctx = make_mtmd(k.mmproj);
        ASSERT_NE(mctx, nullptr) << "mtmd cannot load " << k.mmproj;
        chunks = tokenize(mctx.get(), k.audio);
        n_chunks = mtmd_input_chunks_size(chunks.get());
        ASSERT_EQ(n_chunks, 5u) << "text, media, text, media, text";
        for (size_t i = 0; i < n_chunks; ++i) {
            ASSERT_EQ(mtmd_input_chunk_get_type(chunk_at(i)) == MTMD_INPUT_CHUNK_TYPE_TEXT, i % 2 == 0);
            start.push_back(i == 0 ? 0 : start[i - 1] + mtmd_input_chunk_get_n_pos(chunk_at(i - 1)));
        }
        ASSERT_GT(static_cast<int32_t>(mtmd_input_chunk_get_n_tokens(chunk_at(1))), k.n_batch);
        auto lctx = make_lctx();
        llama_pos new_n_past = -1;
        ASSERT_EQ(mtmd_helper_eval_chunks(mctx.get(), lctx.get(), chunks.get(), 0, 0, k.n_batch, true, &new_n_past), 0);
        want_n_past = new_n_past;
        ASSERT_EQ(want_n_past, mtmd_helper_get_n_pos(chunks.get()));
        want = lcs::last_logits(lctx.get());
        ASSERT_FALSE(want.empty());
    }

    // Chunk i of the prompt (text or media).
    const mtmd_input_chunk * chunk_at(size_t i) const { return mtmd_input_chunks_get(chunks.get(), i); }

    // Decode graphs (one per n_batch slice: each is one ubatch) of chunks [0, i).
    int graphs_before(size_t i) const {
        int g = 0;
        for (size_t c = 0; c < i; ++c) {
            const int n = static_cast<int>(mtmd_input_chunk_get_n_tokens(chunk_at(c)));
            g += (n + k.n_batch - 1) / k.n_batch;
        }
        return g;
    }

    // Asks (per decode graph end) of an uninterrupted run on a setup like `s`.
    std::vector<int> count_graph_ends() {
        setup c(k.mmproj);
        llama_cancel_mtmd_result r;
        EXPECT_EQ(c.eval(chunks.get(), 0, 0, k.n_batch, &r), LLAMA_CANCEL_OK) << r.message;
        return c.dec_trig.graph_ends;
    }

    // Resumes from where `r` left and checks the final logits against the reference.
    void resume_and_check(setup & s, const llama_cancel_mtmd_result & r) {
        s.rearm();
        llama_cancel_mtmd_result r2;
        ASSERT_EQ(s.eval(chunks.get(), r.n_chunks_done, r.n_past, k.n_batch, &r2), LLAMA_CANCEL_OK) << r2.message;
        EXPECT_EQ(r2.n_chunks_done, n_chunks);
        EXPECT_EQ(r2.n_past, want_n_past);
        EXPECT_EQ(pos_max(s.lctx.get()), want_n_past - 1);
        EXPECT_TRUE(same(lcs::last_logits(s.lctx.get()), want)) << "resumed logits differ from an uninterrupted run";
    }

    kind_info              k;
    chunks_ptr             chunks;
    size_t                 n_chunks = 0;
    std::vector<llama_pos> start; // first position of each chunk
    llama_pos              want_n_past = 0;
    std::vector<float>     want;
};

TEST_P(Mtmd, ByteAtZeroMatchesUpstreamHelper) {
    setup s(k.mmproj);
    llama_cancel_mtmd_result r;
    ASSERT_EQ(s.eval(chunks.get(), 0, 0, k.n_batch, &r), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.status, LLAMA_CANCEL_OK);
    EXPECT_EQ(r.n_chunks_done, n_chunks);
    EXPECT_EQ(r.n_past, want_n_past);
    EXPECT_EQ(pos_max(s.lctx.get()), want_n_past - 1);
    EXPECT_TRUE(same(lcs::last_logits(s.lctx.get()), want)) << "logits differ from mtmd_helper_eval_chunks";
    EXPECT_GT(s.enc_trig.asks, 0) << "the encodes ran through the hook bound to the mtmd context";
    EXPECT_EQ(static_cast<int>(s.dec_trig.graph_ends.size()), graphs_before(n_chunks));
    EXPECT_EQ(llama_cancel_hook_get_flag(s.enc_hook.get()), nullptr) << "the encode hook's byte is restored";
    EXPECT_EQ(llama_cancel_hook_get_flag(s.dec_hook.get()), nullptr) << "the decode hook's byte is restored";

    // A second request on the same contexts, after clearing the sequence: the same result (causal
    // attention was restored after the media chunks).
    llama_memory_clear(llama_get_memory(s.lctx.get()), true);
    ASSERT_EQ(s.eval(chunks.get(), 0, 0, k.n_batch, &r), LLAMA_CANCEL_OK) << r.message;
    EXPECT_TRUE(same(lcs::last_logits(s.lctx.get()), want));

    // One hook for both the encode and the decode, as the header allows.
    trigger unused;
    auto     shared = make_hook(&unused);
    auto     mctx   = make_mtmd(k.mmproj, llama_cancel_hook_eval_callback, shared.get());
    auto     lctx   = make_lctx(llama_cancel_hook_eval_callback, shared.get());
    int8_t   flag   = 0;
    llama_cancel_mtmd_params p = llama_cancel_mtmd_default_params();
    p.flag        = &flag;
    p.decode_hook = shared.get();
    p.n_batch     = k.n_batch;
    ASSERT_EQ(llama_cancel_mtmd_eval_chunks(mctx.get(), shared.get(), lctx.get(), chunks.get(), 0, 0, &p, &r),
              LLAMA_CANCEL_OK)
        << r.message;
    EXPECT_TRUE(same(lcs::last_logits(lctx.get()), want)) << "with one shared hook";
}

TEST_P(Mtmd, BytePresetCancelsWithMemoryUntouched) {
    setup s(k.mmproj);
    // Something in memory already: chunk 0 (the cancel at the first node of chunk 1's encode).
    llama_cancel_mtmd_result r;
    s.enc_trig.at = 1;
    ASSERT_EQ(s.eval(chunks.get(), 0, 0, k.n_batch, &r), LLAMA_CANCEL_CANCELLED);
    ASSERT_EQ(r.n_chunks_done, 1u);
    s.rearm();

    s.flag = 1;
    ASSERT_EQ(s.eval(chunks.get(), 1, r.n_past, k.n_batch, &r), LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.status, LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.n_chunks_done, 1u);
    EXPECT_EQ(r.n_past, start[1]);
    EXPECT_EQ(pos_max(s.lctx.get()), start[1] - 1) << "memory untouched";
    EXPECT_EQ(s.enc_trig.asks, 0) << "nothing encoded";
    EXPECT_EQ(s.dec_trig.asks, 0) << "nothing decoded";
    EXPECT_STREQ(r.message, "");
    resume_and_check(s, r);
}

TEST_P(Mtmd, CancelInsideEncodeDecodesNothingOfThatChunk) {
    // Encode asks of one media chunk, counted on an uninterrupted run.
    setup c(k.mmproj);
    llama_cancel_mtmd_result r;
    ASSERT_EQ(c.eval(chunks.get(), 0, 0, k.n_batch, &r), LLAMA_CANCEL_OK) << r.message;
    const int per_encode = c.enc_trig.asks / 2;
    ASSERT_GT(per_encode, 10);

    setup s(k.mmproj);
    s.enc_trig.at = per_encode + per_encode / 2; // in the middle of the second media chunk's encode
    ASSERT_EQ(s.eval(chunks.get(), 0, 0, k.n_batch, &r), LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_EQ(r.n_chunks_done, 3u);
    EXPECT_EQ(r.n_past, start[3]);
    EXPECT_EQ(pos_max(s.lctx.get()), start[3] - 1) << "nothing of the stopped chunk in memory";
    EXPECT_TRUE(llama_cancel_hook_stopped(s.enc_hook.get())) << "the hook stopped the clip graph";
    EXPECT_EQ(static_cast<int>(s.dec_trig.graph_ends.size()), graphs_before(3)) << "its embeddings were not decoded";
    EXPECT_LT(s.enc_trig.asks, 2 * per_encode) << "the encode stopped early";
    resume_and_check(s, r);
}

// The token loop after a multimodal prompt: uninterrupted, then stopped inside the second encode and
// resumed from the chunk it reports; both generate the same tokens (greedy).
TEST_P(Mtmd, GenerateAfterMediaPromptCancelsAndResumes) {
    setup c(k.mmproj);
    llama_cancel_generate_params gp = llama_cancel_generate_default_params();
    gp.flag      = &c.flag;
    gp.hook      = c.dec_hook.get();
    gp.n_predict = 6;
    std::vector<llama_token> want_tokens(6, -1), got(6, -1);
    llama_cancel_generate_result r;
    size_t done = 0;
    ASSERT_EQ(llama_cancel_generate_mtmd(c.mctx.get(), c.enc_hook.get(), c.lctx.get(), chunks.get(), 0, 0, &gp,
                                         want_tokens.data(), 6, &r, &done),
              LLAMA_CANCEL_OK)
        << r.message;
    EXPECT_EQ(done, n_chunks);
    EXPECT_EQ(r.n_prompt_committed, want_n_past);
    EXPECT_EQ(r.n_generated, 6);
    EXPECT_EQ(r.n_past, want_n_past + 6);
    const int per_encode = c.enc_trig.asks / 2;

    setup s(k.mmproj);
    gp.flag          = &s.flag;
    gp.hook          = s.dec_hook.get();
    s.enc_trig.at    = per_encode + per_encode / 2;
    ASSERT_EQ(llama_cancel_generate_mtmd(s.mctx.get(), s.enc_hook.get(), s.lctx.get(), chunks.get(), 0, 0, &gp,
                                         got.data(), 6, &r, &done),
              LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.stop_reason, LLAMA_CANCEL_STOP_CANCELLED);
    EXPECT_EQ(done, 3u);
    EXPECT_EQ(r.n_past, start[3]);
    EXPECT_EQ(r.n_generated, 0);
    s.rearm();
    ASSERT_EQ(llama_cancel_generate_mtmd(s.mctx.get(), s.enc_hook.get(), s.lctx.get(), chunks.get(), done, r.n_past,
                                         &gp, got.data(), 6, &r, &done),
              LLAMA_CANCEL_OK)
        << r.message;
    EXPECT_EQ(got, want_tokens) << "resumed generation differs";
}

TEST_P(Mtmd, MtmdContextEncodesCorrectlyAfterACancel) {
    auto fresh = make_mtmd(k.mmproj);
    ASSERT_EQ(mtmd_encode_chunk(fresh.get(), chunk_at(1)), 0);
    const auto ref = embeddings(fresh.get(), chunk_at(1));

    setup s(k.mmproj);
    s.enc_trig.at = 12;
    llama_cancel_mtmd_result r;
    ASSERT_EQ(s.eval(chunks.get(), 1, 0, k.n_batch, &r), LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.n_chunks_done, 1u);
    EXPECT_FALSE(same(embeddings(s.mctx.get(), chunk_at(1)), ref)) << "the stopped encode left garbage";

    s.rearm();
    llama_cancel_hook_reset(s.enc_hook.get());
    ASSERT_EQ(mtmd_encode_chunk(s.mctx.get(), chunk_at(1)), 0);
    EXPECT_TRUE(same(embeddings(s.mctx.get(), chunk_at(1)), ref)) << "the reused mtmd context encodes as a fresh one";
}

class MtmdDecodeCancel : public Mtmd {
  protected:
    // Stops the decode graph of slice `slice` of chunk `chunk` in its middle.
    void cancel_in(size_t chunk, int slice) {
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
    trigger count;
    {
        auto mctx = make_mtmd(k.mmproj);
        auto lctx = make_lctx(trigger::cb, &count);
        llama_cancel_mtmd_params p = llama_cancel_mtmd_default_params();
        p.n_batch = k.n_batch;
        llama_cancel_mtmd_result r;
        ASSERT_EQ(llama_cancel_mtmd_eval_chunks(mctx.get(), nullptr, lctx.get(), chunks.get(), 0, 0, &p, &r),
                  LLAMA_CANCEL_OK)
            << r.message;
    }
    const int g = graphs_before(2) - 1; // last graph of chunk 1
    ASSERT_LT(g, static_cast<int>(count.graph_ends.size()));

    int8_t  flag = 0;
    trigger trig;
    trig.flag = &flag;
    trig.at   = count.graph_ends[g];
    trigger enc;
    auto    enc_hook = make_hook(&enc);
    auto    mctx     = make_mtmd(k.mmproj, llama_cancel_hook_eval_callback, enc_hook.get());
    auto    lctx     = make_lctx(trigger::cb, &trig);
    llama_cancel_mtmd_params p = llama_cancel_mtmd_default_params();
    p.flag    = &flag;
    p.n_batch = k.n_batch;
    llama_cancel_mtmd_result r;
    ASSERT_EQ(llama_cancel_mtmd_eval_chunks(mctx.get(), enc_hook.get(), lctx.get(), chunks.get(), 0, 0, &p, &r),
              LLAMA_CANCEL_CANCELLED)
        << r.message;
    EXPECT_EQ(r.n_chunks_done, 2u) << "chunk 1 completed, chunk 2 never started";
    EXPECT_EQ(r.n_past, start[2]);
    EXPECT_EQ(pos_max(lctx.get()), start[2] - 1);
    EXPECT_EQ(trig.asks, count.graph_ends[g]) << "no decode after the stop";

    flag    = 0;
    trig.at = -1;
    llama_cancel_mtmd_result r2;
    ASSERT_EQ(llama_cancel_mtmd_eval_chunks(mctx.get(), enc_hook.get(), lctx.get(), chunks.get(), r.n_chunks_done,
                                            r.n_past, &p, &r2),
              LLAMA_CANCEL_OK)
        << r2.message;
    EXPECT_EQ(r2.n_past, want_n_past);
    EXPECT_TRUE(same(lcs::last_logits(lctx.get()), want)) << "resumed logits differ from an uninterrupted run";
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
    ASSERT_EQ(r.n_chunks_done, 1u);

    s.rearm();
    // The resumed call starts at chunk 1: its asks count from there. Late in chunk 3's first slice:
    const int base = ends[graphs_before(1) - 1];
    s.dec_trig.at  = ends[graphs_before(3)] - base - 3;
    ASSERT_EQ(s.eval(chunks.get(), r.n_chunks_done, r.n_past, k.n_batch, &r), LLAMA_CANCEL_CANCELLED) << r.message;
    ASSERT_EQ(r.n_chunks_done, 3u);
    EXPECT_EQ(pos_max(s.lctx.get()), start[3] - 1);
    resume_and_check(s, r);
}

// Upstream's hazard, the reason for the wrapper: with the stateless llama_cancel_eval_callback as
// mtmd's cb_eval and the byte set mid-encode, the clip graph stops and mtmd_encode_chunk still
// returns 0, its embeddings garbage.
TEST_P(Mtmd, UpstreamEncodeReportsStoppedGraphAsSuccess) {
    struct store_then_read {
        int    asks = 0;
        int    at   = 12;
        int8_t flag = 0;
        static bool cb(ggml_tensor * t, bool ask, void * data) {
            auto * s = static_cast<store_then_read *>(data);
            if (ask && ++s->asks == s->at) {
                __atomic_store_n(&s->flag, 1, __ATOMIC_RELAXED); // another thread's store, as it were
            }
            return llama_cancel_eval_callback(t, ask, &s->flag);
        }
    };
    auto fresh = make_mtmd(k.mmproj);
    ASSERT_EQ(mtmd_encode_chunk(fresh.get(), chunk_at(1)), 0);
    const auto ref = embeddings(fresh.get(), chunk_at(1));

    store_then_read st;
    auto mctx = make_mtmd(k.mmproj, store_then_read::cb, &st);
    EXPECT_EQ(mtmd_encode_chunk(mctx.get(), chunk_at(1)), 0) << "upstream reports the stopped encode as success";
    EXPECT_FALSE(same(embeddings(mctx.get(), chunk_at(1)), ref)) << "with garbage embeddings";

    // The wrapper with the same stateless binding (no hook): the byte read after the encode makes
    // it a cancel, and the garbage is never decoded.
    st.asks = 0;
    st.flag = 0;
    auto lctx = make_lctx();
    llama_cancel_mtmd_params p = llama_cancel_mtmd_default_params();
    p.flag    = &st.flag;
    p.n_batch = k.n_batch;
    llama_cancel_mtmd_result r;
    EXPECT_EQ(llama_cancel_mtmd_eval_chunks(mctx.get(), nullptr, lctx.get(), chunks.get(), 1, 0, &p, &r),
              LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.n_chunks_done, 1u);
    EXPECT_EQ(pos_max(lctx.get()), -1);
}

TEST_P(Mtmd, InitFromFileBindsTheHook) {
    trigger  trig;
    int8_t   flag = 0;
    auto     hook = make_hook(&trig);
    llama_cancel_load_result lr;
    mtmd_ptr mctx(llama_cancel_mtmd_init_from_file(k.mmproj.c_str(), g_model, hook.get(), 2, false, &flag, &lr));
    ASSERT_NE(mctx, nullptr) << lr.message;
    EXPECT_EQ(lr.status, LLAMA_CANCEL_OK);
    EXPECT_EQ(llama_cancel_hook_get_flag(hook.get()), nullptr);

    // Encodes through it stop on the byte.
    trig.flag = &flag;
    trig.asks = 0;
    trig.at   = 10;
    auto lctx = make_lctx();
    llama_cancel_mtmd_params p = llama_cancel_mtmd_default_params();
    p.flag    = &flag;
    p.n_batch = k.n_batch;
    llama_cancel_mtmd_result r;
    ASSERT_EQ(llama_cancel_mtmd_eval_chunks(mctx.get(), hook.get(), lctx.get(), chunks.get(), 0, 0, &p, &r),
              LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.n_chunks_done, 1u);
    EXPECT_TRUE(llama_cancel_hook_stopped(hook.get()));
    flag    = 0;
    trig.at = -1;
    ASSERT_EQ(llama_cancel_mtmd_eval_chunks(mctx.get(), hook.get(), lctx.get(), chunks.get(), 1, r.n_past, &p, &r),
              LLAMA_CANCEL_OK)
        << r.message;
    EXPECT_TRUE(same(lcs::last_logits(lctx.get()), want));
}

TEST_P(Mtmd, InitFromFileCancelsAndFailsClearly) {
    llama_cancel_load_result lr;
    int8_t flag = 1;
    EXPECT_EQ(llama_cancel_mtmd_init_from_file(k.mmproj.c_str(), g_model, nullptr, 2, false, &flag, &lr), nullptr);
    EXPECT_EQ(lr.status, LLAMA_CANCEL_CANCELLED);

    // The byte stored while libmtmd loads: from its log callback, on the loading thread, at the
    // first line it logs; its progress callback then reads the byte and aborts the load.
    flag = 0;
    mtmd_helper_log_set(
        [](ggml_log_level, const char *, void * f) { __atomic_store_n(static_cast<int8_t *>(f), 1, __ATOMIC_RELAXED); },
        &flag);
    mtmd_context * m = llama_cancel_mtmd_init_from_file(k.mmproj.c_str(), g_model, nullptr, 2, false, &flag, &lr);
    mtmd_helper_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    EXPECT_EQ(flag, 1) << "libmtmd logged while loading";
    EXPECT_EQ(m, nullptr);
    EXPECT_EQ(lr.status, LLAMA_CANCEL_CANCELLED) << lr.message;
    EXPECT_NE(std::string(lr.message).find("cancelled"), std::string::npos) << lr.message;
    if (m != nullptr) {
        mtmd_free(m);
    }

    EXPECT_EQ(llama_cancel_mtmd_init_from_file(nullptr, g_model, nullptr, 2, false, nullptr, &lr), nullptr);
    EXPECT_NE(std::string(lr.message).find("NULL"), std::string::npos);
    EXPECT_EQ(llama_cancel_mtmd_init_from_file(k.mmproj.c_str(), nullptr, nullptr, 2, false, nullptr, &lr), nullptr);
    EXPECT_NE(std::string(lr.message).find("NULL"), std::string::npos);
    EXPECT_EQ(llama_cancel_mtmd_init_from_file("/nonexistent/mmproj.gguf", g_model, nullptr, 2, false, nullptr, &lr),
              nullptr);
    EXPECT_EQ(lr.status, LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::string(lr.message).find("cannot open"), std::string::npos) << lr.message;
    const std::string text = ::testing::TempDir() + "/not-an-mmproj-" + k.name + ".gguf";
    std::ofstream(text) << "hello, I am not a projector\n";
    EXPECT_EQ(llama_cancel_mtmd_init_from_file(text.c_str(), g_model, nullptr, 2, false, nullptr, &lr), nullptr);
    EXPECT_NE(std::string(lr.message).find("not a GGUF file"), std::string::npos) << lr.message;
    // A text model is not a projector: mtmd refuses it.
    const std::string model_path = env("LLAMA_CANCEL_SMALL_MODEL");
    EXPECT_EQ(llama_cancel_mtmd_init_from_file(model_path.c_str(), g_model, nullptr, 2, false, nullptr, &lr), nullptr);
    EXPECT_EQ(lr.status, LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::string(lr.message).find("could not load"), std::string::npos) << lr.message;
}

// A prompt that ends with a media chunk (audio: nothing follows it; vision: "<end_of_image>"):
// logits_last asks for the output of the last token whatever its kind.
TEST_P(Mtmd, LogitsForTheLastTokenOfAMediaChunk) {
    setup s(k.mmproj);
    const std::string prompt = std::string("Only this: ") + mtmd_default_marker();
    mtmd_bitmap * bm = make_bitmap(k.audio, 3);
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
    EXPECT_FALSE(lcs::last_logits(s.lctx.get()).empty());
}

TEST_P(Mtmd, ClearErrors) {
    setup s(k.mmproj);
    llama_cancel_mtmd_params p = s.params(k.n_batch);
    llama_cancel_mtmd_result r;
    auto err = [&](mtmd_context * m, llama_context * l, const mtmd_input_chunks * c, size_t first, const char * what) {
        EXPECT_EQ(llama_cancel_mtmd_eval_chunks(m, s.enc_hook.get(), l, c, first, 0, &p, &r), LLAMA_CANCEL_ERROR);
        EXPECT_EQ(r.status, LLAMA_CANCEL_ERROR);
        EXPECT_NE(std::string(r.message).find(what), std::string::npos) << r.message;
    };
    err(nullptr, s.lctx.get(), chunks.get(), 0, "mctx is NULL");
    err(s.mctx.get(), nullptr, chunks.get(), 0, "lctx is NULL");
    err(s.mctx.get(), s.lctx.get(), nullptr, 0, "chunks is NULL");
    err(s.mctx.get(), s.lctx.get(), chunks.get(), n_chunks + 1, "past the end");
    p.seq_id = 3;
    err(s.mctx.get(), s.lctx.get(), chunks.get(), 0, "seq_id 3");
    p.seq_id  = 0;
    p.n_batch = 65;
    err(s.mctx.get(), s.lctx.get(), chunks.get(), 0, "n_batch 65");
    p.n_batch = k.n_batch;
    EXPECT_EQ(pos_max(s.lctx.get()), -1);
    EXPECT_EQ(s.enc_trig.asks + s.dec_trig.asks, 0);

    // first_chunk == the number of chunks: nothing to do.
    EXPECT_EQ(llama_cancel_mtmd_eval_chunks(s.mctx.get(), s.enc_hook.get(), s.lctx.get(), chunks.get(), n_chunks, 7,
                                            &p, &r),
              LLAMA_CANCEL_OK);
    EXPECT_EQ(r.n_chunks_done, n_chunks);
    EXPECT_EQ(r.n_past, 7);
    EXPECT_FALSE(mtmd_decode_use_mrope(s.mctx.get())) << "M-RoPE projectors (refused) are not covered here";
}

// The stateless llama_cancel_eval_callback bound as mtmd's cb_eval (through lcs::stateless_probe,
// which forwards every call) on a clip encode of the `small` vision projector: a byte stored while
// a node a quarter into the graph computes stops the encode at a later checkpoint, before its end;
// mtmd_encode_chunk still returns 0 (upstream's hazard, the caller's to handle without the wrapper).
TEST(MtmdStateless, StopsAClipEncode) {
    const std::string model_path = env("LLAMA_CANCEL_SMALL_MODEL");
    const std::string mmproj     = env("LLAMA_CANCEL_VISION_SMALL_MMPROJ");
    ASSERT_FALSE(model_path.empty() || mmproj.empty()) << "set LLAMA_CANCEL_SMALL_MODEL and _VISION_SMALL_MMPROJ";
    lcs::quiet_logs();
    mtmd_helper_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    lcs::load_backends();
    lcs::model_ptr model = lcs::load_model(model_path);
    ASSERT_NE(model, nullptr);
    g_model = model.get();

    lcs::stateless_probe probe;
    auto mctx = make_mtmd(mmproj, lcs::stateless_probe::eval_cb, &probe);
    ASSERT_NE(mctx, nullptr) << "mtmd cannot load " << mmproj;
    mtmd_bitmap * image = make_bitmap(false, 5);
    const std::string prompt = mtmd_default_marker();
    mtmd_input_text text{prompt.c_str(), prompt.size(), true, true};
    const mtmd_bitmap * bitmaps[1] = {image};
    chunks_ptr chunks(mtmd_input_chunks_init());
    ASSERT_EQ(mtmd_tokenize(mctx.get(), chunks.get(), &text, bitmaps, 1), 0);
    mtmd_bitmap_free(image);
    const mtmd_input_chunk * chunk = nullptr;
    for (size_t i = 0; i < mtmd_input_chunks_size(chunks.get()); ++i) {
        const mtmd_input_chunk * c = mtmd_input_chunks_get(chunks.get(), i);
        chunk = mtmd_input_chunk_get_type(c) == MTMD_INPUT_CHUNK_TYPE_IMAGE ? c : chunk;
    }
    ASSERT_NE(chunk, nullptr);

    // The byte at 0: the thread's policy measures the CPU; the encode must hold checkpoints.
    double ms = 0;
    for (int i = 0; i < 3; ++i) {
        probe.rearm(-1);
        const double t0 = lcs::now_ms();
        ASSERT_EQ(mtmd_encode_chunk(mctx.get(), chunk), 0);
        ms = lcs::now_ms() - t0;
    }
    const auto ref = embeddings(mctx.get(), chunk);
    const int  n_asks = probe.asks;
    std::printf("clip encode: %d nodes, largest %.3g FLOPs, %.1f ms, %d checkpoints with the byte at 0\n", n_asks,
                probe.max_work, ms, probe.checkpoints);
    ASSERT_GE(ms, 4 * LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS) << "the encode is too short to hold checkpoints";
    EXPECT_GE(probe.checkpoints, 2);
    EXPECT_EQ(probe.stopped_at, -1);

    probe.rearm(n_asks / 4);
    EXPECT_EQ(mtmd_encode_chunk(mctx.get(), chunk), 0) << "upstream reports the stopped encode as success";
    ASSERT_GT(probe.stored_at, 0) << "the probe never stored the byte";
    EXPECT_FALSE(probe.stored_late) << "node " << probe.store_at << "'s view ended without a checkpoint";
    ASSERT_GT(probe.stopped_at, 0) << "the encode ran to its end with the byte set at node " << probe.store_at;
    EXPECT_LT(probe.stopped_at, n_asks);
    EXPECT_FALSE(same(embeddings(mctx.get(), chunk), ref)) << "the stopped encode left garbage";
    std::printf("byte stored during node %d of %d: stopped at the checkpoint after node %d (%d nodes computed after "
                "it, %.0f%% of the rest)\n",
                probe.store_at, n_asks, probe.stopped_at, probe.stopped_at - probe.store_at,
                100.0 * (probe.stopped_at - probe.store_at) / (n_asks - probe.store_at));
    mctx.reset();
    g_model = nullptr;
}

INSTANTIATE_TEST_SUITE_P(Kinds, Mtmd, ::testing::Values("vision", "audio"),
                         [](const ::testing::TestParamInfo<std::string> & i) { return i.param; });
INSTANTIATE_TEST_SUITE_P(Kinds, MtmdDecodeCancel, ::testing::Values("vision", "audio"),
                         [](const ::testing::TestParamInfo<std::string> & i) { return i.param; });
