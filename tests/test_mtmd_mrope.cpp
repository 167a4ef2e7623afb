// llama_cancel_mtmd_eval_chunks on decoders with M-RoPE (mtmd_decode_use_mrope): libmtmd gives
// each image or audio embedding 4 positions (section-major [t | y | x | z]; an image's t is the
// same for all its tokens, x and y follow its token grid) and a media chunk advances n_past by
// mtmd_input_chunk_get_n_pos, not by its token count. One program, run once per projector family
// (tests/mtmd.cmake): the text model in LLAMA_CANCEL_MROPE_MODEL, the projector in
// LLAMA_CANCEL_MROPE_MMPROJ, on the setup in LLAMA_CANCEL_BACKEND (the CPU when unset). The same
// tests run on families without M-RoPE too (LFM2-VL's projector on the hybrid lfm2 model, Voxtral's
// and GLM-ASR's audio projectors on a llama one) with LLAMA_CANCEL_MROPE_EXPECT=0. An audio projector that cuts a clip into windows, each a chunk of its
// own (qwen3a: 8 s), gets a first clip of LLAMA_CANCEL_MROPE_AUDIO_SECONDS seconds (default 1) and
// LLAMA_CANCEL_MROPE_MEDIA_CHUNKS (default 2) says how many media chunks the prompt then has; the
// stops land in the second media chunk, there a window between two others of the same clip.
//
// Every test starts from upstream's helper (mtmd_helper_eval_chunks) on a plain context with the
// same n_batch and n_ubatch: the evaluation gives its logits bit for bit, and so does one stopped
// inside an encode or inside an embedding decode and resumed from what it reports. Stops are
// triggered at a counted graph node (fixtures::node_trigger), never by timing.
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

bool on_cpu() { return test_backend().name() == "cpu"; }

std::string mmproj_path() { return fixtures::env("LLAMA_CANCEL_MROPE_MMPROJ"); }

// Whether the family's decoder takes M-RoPE positions (LLAMA_CANCEL_MROPE_EXPECT, default 1).
bool expect_mrope() { return fixtures::env("LLAMA_CANCEL_MROPE_EXPECT") != "0"; }

// A positive integer from the environment, `def` when unset.
int env_int(const char * name, int def) {
    const std::string v = fixtures::env(name);
    return v.empty() ? def : std::stoi(v);
}

// Length of the prompt's first audio clip and the media chunks the prompt has.
uint32_t audio_seconds() { return static_cast<uint32_t>(env_int("LLAMA_CANCEL_MROPE_AUDIO_SECONDS", 1)); }
size_t   expected_media_chunks() { return static_cast<size_t>(env_int("LLAMA_CANCEL_MROPE_MEDIA_CHUNKS", 2)); }

// The projector on the setup's devices (the CPU alone on the CPU setup), `cb` as its cb_eval.
mtmd_ptr make_mtmd(ggml_backend_sched_eval_callback cb = nullptr, void * data = nullptr) {
    mtmd_helper_log_set([](ggml_log_level, const char *, void *) {}, nullptr); // libmtmd's logs too
    mtmd_context_params mp = mtmd_context_params_default();
    mp.use_gpu           = !on_cpu();
    mp.warmup            = false;
    mp.print_timings     = false;
    mp.n_threads         = 2;
    mp.cb_eval           = cb;
    mp.cb_eval_user_data = data;
    return mtmd_ptr(mtmd_init_from_file(mmproj_path().c_str(), test_backend().model.get(), mp));
}

// n_ctx 2048: two whisper audio chunks take 1500 positions.
common::context_ptr make_lctx(llama_cancel_hook * hook, uint32_t n_batch, uint32_t n_ubatch) {
    common::context_options opt = fixtures::context_options(n_batch, n_ubatch);
    opt.n_ctx = 2048;
    return fixtures::make_backend_context(test_backend().model.get(), hook, opt);
}

// text, media, text, media, text: a 96x64 and a 64x96 image (token grids 6x4 and 4x6 with the
// synthetic qwen2vl projector), or two audio clips (the first audio_seconds() long: in windows, one
// media chunk each). The images are not square, so that a swap of the x and y sections changes the
// logits.
chunks_ptr tokenize(mtmd_context * mctx, bool audio) {
    chunks_ptr chunks(mtmd_input_chunks_init());
    EXPECT_EQ(fixtures::tokenize_two_media(mctx, chunks.get(), audio, 96, 64, 64, 96, audio ? audio_seconds() : 1), 0);
    return chunks;
}

bool same(const std::vector<float> & a, const std::vector<float> & b) {
    if (a.empty() || b.empty()) {
        ADD_FAILURE() << "an output to compare is missing (" << a.size() << " and " << b.size() << " floats)";
        return false;
    }
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Logits against the reference: bit for bit on the CPU, as the header promises. Off the CPU it
// promises no bit-identity: on ggml-vulkan a hooked clip graph's last bits can depend on where its
// checkpoints fall (a view boundary between two nodes ggml-vulkan would otherwise fuse), and that
// depends on the rates measured (seen in CI on the qwen3a and voxtral encoders): there within 1e-3,
// the difference printed.
void expect_logits(const std::vector<float> & got, const std::vector<float> & want, const char * what) {
    if (on_cpu()) {
        EXPECT_TRUE(same(got, want)) << what;
        return;
    }
    ASSERT_FALSE(got.empty() || want.empty()) << what << ": an output is missing";
    const double d = fixtures::relative_difference(got, want);
    EXPECT_LT(d, 1e-3) << what;
    if (d > 0.0) {
        std::printf("note: %s in the last bits on %s (relative %.2g)\n", what, test_backend().name().c_str(), d);
    }
}

// An mtmd context with its encode hook and a text context with its decode hook, each hook chaining
// a trigger that stores the byte at a chosen node.
struct setup {
    fixtures::node_trigger enc_trig, dec_trig;
    int8_t                 byte = 0;
    common::hook_ptr       enc_hook, dec_hook;
    mtmd_ptr               mctx;
    common::context_ptr    lctx;
    int32_t                n_batch;

    setup(int32_t n_batch_, uint32_t n_ubatch) : n_batch(n_batch_) {
        enc_trig.byte = &byte;
        dec_trig.byte = &byte;
        enc_hook      = fixtures::make_hook(&enc_trig);
        dec_hook      = fixtures::make_hook(&dec_trig);
        mctx          = make_mtmd(llama_cancel_hook_eval_callback, enc_hook.get());
        lctx          = make_lctx(dec_hook.get(), static_cast<uint32_t>(n_batch), n_ubatch);
    }

    llama_cancel_mtmd_params params() {
        llama_cancel_mtmd_params p = llama_cancel_mtmd_default_params();
        p.byte      = &byte;
        p.hook      = dec_hook.get();
        p.mtmd_hook = enc_hook.get();
        p.n_batch   = n_batch;
        return p;
    }

    int32_t eval(const mtmd_input_chunks * chunks, int32_t first, llama_pos n_past, llama_cancel_mtmd_result * r,
                 float max_stop_ms = 0.0f) {
        llama_cancel_mtmd_params p = params();
        p.max_stop_ms = max_stop_ms;
        return llama_cancel_mtmd_eval_chunks(mctx.get(), lctx.get(), chunks, first, n_past, &p, r);
    }

    // Clears the byte and the triggers, as a host does before resuming.
    void rearm() {
        byte = 0;
        enc_trig.reset();
        dec_trig.reset();
    }
};

} // namespace

// The prompt, its chunks' first positions and upstream's result for one n_batch / n_ubatch.
class MtmdMrope : public ::testing::Test {
  protected:
    void SetUp() override { reference(64, 64); }

    // Upstream's helper on a plain context: the logits and n_past every run must give.
    void reference(int32_t n_batch_, uint32_t n_ubatch_) {
        n_batch  = n_batch_;
        n_ubatch = n_ubatch_;
        auto mctx = make_mtmd();
        ASSERT_NE(mctx, nullptr) << "mtmd cannot load " << mmproj_path();
        ASSERT_EQ(mtmd_decode_use_mrope(mctx.get()), expect_mrope()) << "LLAMA_CANCEL_MROPE_EXPECT is wrong";
        audio  = mtmd_support_audio(mctx.get());
        chunks = tokenize(mctx.get(), audio);
        n_chunks = mtmd_input_chunks_size(chunks.get());
        media.clear();
        start.clear();
        for (size_t i = 0; i < n_chunks; ++i) {
            if (mtmd_input_chunk_get_type(chunk_at(i)) != MTMD_INPUT_CHUNK_TYPE_TEXT) {
                media.push_back(i);
            }
            start.push_back(i == 0 ? 0 : start[i - 1] + mtmd_input_chunk_get_n_pos(chunk_at(i - 1)));
        }
        ASSERT_EQ(media.size(), expected_media_chunks()) << "media chunks of the prompt (LLAMA_CANCEL_MROPE_MEDIA_CHUNKS)";
        ASSERT_EQ(media.front(), 1u) << "text, then media";
        ASSERT_EQ(mtmd_input_chunk_get_type(chunk_at(n_chunks - 1)), MTMD_INPUT_CHUNK_TYPE_TEXT) << "text last";
        if (expected_media_chunks() == 2) {
            ASSERT_EQ(n_chunks, 5u) << "text, media, text, media, text";
        }
        target = media[1];
        if (!audio && expect_mrope()) {
            // An image advances n_past by the longer side of its token grid, not by its tokens.
            ASSERT_LT(mtmd_input_chunk_get_n_pos(chunk_at(1)), static_cast<llama_pos>(media_tokens(1)));
        }
        auto lctx = make_lctx(nullptr, static_cast<uint32_t>(n_batch), n_ubatch);
        llama_pos n_past = -1;
        ASSERT_EQ(mtmd_helper_eval_chunks(mctx.get(), lctx.get(), chunks.get(), 0, 0, n_batch, true, &n_past), 0);
        want_n_past = n_past;
        ASSERT_EQ(want_n_past, mtmd_helper_get_n_pos(chunks.get()));
        want = common::last_logits(lctx.get());
        ASSERT_FALSE(want.empty());
    }

    const mtmd_input_chunk * chunk_at(size_t i) const { return mtmd_input_chunks_get(chunks.get(), i); }
    int32_t media_tokens(size_t i) const { return static_cast<int32_t>(mtmd_input_chunk_get_n_tokens(chunk_at(i))); }

    // Memory of sequence 0 after upstream's helper evaluated chunks [0, n), for byte comparisons.
    std::vector<uint8_t> memory_after(size_t n) {
        auto mctx = make_mtmd();
        auto lctx = make_lctx(nullptr, static_cast<uint32_t>(n_batch), n_ubatch);
        llama_pos n_past = 0;
        for (size_t i = 0; i < n; ++i) {
            EXPECT_EQ(mtmd_helper_eval_chunk_single(mctx.get(), lctx.get(), chunk_at(i), n_past, 0, n_batch, false,
                                                    &n_past),
                      0);
        }
        return fixtures::seq_state(lctx.get(), 0);
    }

    // Resumes from where `r` left and checks n_past, memory and the final logits.
    void resume_and_check(setup & s, const llama_cancel_mtmd_result & r) {
        s.rearm();
        llama_cancel_mtmd_result r2;
        ASSERT_EQ(s.eval(chunks.get(), r.n_chunks_done, r.n_past, &r2), LLAMA_CANCEL_OK) << r2.message;
        EXPECT_EQ(r2.n_chunks_done, static_cast<int32_t>(n_chunks));
        EXPECT_EQ(r2.n_past, want_n_past);
        EXPECT_EQ(fixtures::pos_max(s.lctx.get()), want_n_past - 1);
        expect_logits(common::last_logits(s.lctx.get()), want, "resumed logits differ from an uninterrupted run");
    }

    // The encode asks of each chunk (0 for text; each media chunk's encoded alone by a plain mtmd
    // context with a counting cb_eval: the scheduler asks once per node whatever the answers) and
    // the decode graphs' ends of an uninterrupted run, whose encode asks add up to theirs.
    void count(std::vector<int> * encode_asks, std::vector<int> * graph_ends) {
        setup c(n_batch, n_ubatch);
        llama_cancel_mtmd_result r;
        ASSERT_EQ(c.eval(chunks.get(), 0, 0, &r), LLAMA_CANCEL_OK) << r.message;
        *graph_ends = c.dec_trig.graph_ends;

        fixtures::node_trigger t;
        auto mctx = make_mtmd(fixtures::node_trigger::eval_cb, &t);
        ASSERT_NE(mctx, nullptr);
        encode_asks->assign(n_chunks, 0);
        int total = 0;
        for (size_t i : media) {
            t.reset();
            ASSERT_EQ(mtmd_encode_chunk(mctx.get(), chunk_at(i)), 0);
            (*encode_asks)[i] = t.calls;
            total += t.calls;
        }
        ASSERT_EQ(total, c.enc_trig.calls) << "the encodes of the chunks alone ask as often as in the run";
    }

    // Encode asks of the chunks before chunk i.
    static int asks_before(size_t i, const std::vector<int> & encode_asks) {
        int n = 0;
        for (size_t c = 0; c < i; ++c) {
            n += encode_asks[c];
        }
        return n;
    }

    // The first decode graph of chunk i in an uninterrupted run, given the graphs of each chunk.
    int first_graph_of(size_t i, const std::vector<int> & per_chunk) const {
        int g = 0;
        for (size_t c = 0; c < i; ++c) {
            g += per_chunk[c];
        }
        return g;
    }

    // Decode graphs per chunk when each n_batch slice is split into n_ubatch graphs.
    std::vector<int> graphs_per_chunk() const {
        std::vector<int> g;
        for (size_t i = 0; i < n_chunks; ++i) {
            const int n = media_tokens(i);
            int graphs = 0;
            for (int a = 0; a < n; a += n_batch) {
                const int k = std::min(n_batch, n - a);
                graphs += (k + static_cast<int>(n_ubatch) - 1) / static_cast<int>(n_ubatch);
            }
            g.push_back(graphs);
        }
        return g;
    }

    // Stops graph `slice` of the target chunk (the second media chunk: chunk 3, or a clip's second
    // window) in its middle: the whole chunk goes, memory equals upstream's after the chunks before
    // it, the resume gives upstream's logits.
    void stop_inside_second_media_decode(int slice) {
        std::vector<int> encode_asks;
        std::vector<int> ends;
        ASSERT_NO_FATAL_FAILURE(count(&encode_asks, &ends));
        const std::vector<int> per_chunk = graphs_per_chunk();
        ASSERT_EQ(static_cast<int>(ends.size()), first_graph_of(n_chunks, per_chunk));
        ASSERT_LT(slice, per_chunk[target]) << "the media chunk has that many decode graphs";
        const int g     = first_graph_of(target, per_chunk) + slice;
        const int begin = ends[g - 1];

        setup s(n_batch, n_ubatch);
        s.dec_trig.at = begin + (ends[g] - begin) / 2;
        llama_cancel_mtmd_result r;
        ASSERT_EQ(s.eval(chunks.get(), 0, 0, &r), LLAMA_CANCEL_CANCELLED) << r.message;
        EXPECT_EQ(r.n_chunks_done, static_cast<int32_t>(target));
        EXPECT_EQ(r.n_past, start[target]);
        EXPECT_TRUE(llama_cancel_hook_stopped(s.dec_hook.get()));
        EXPECT_EQ(static_cast<int>(s.dec_trig.graph_ends.size()), g) << "stopped in graph " << g;
        // The slices already decoded hold position start[target] (an image's t), as the stopped
        // one does: all of them go.
        EXPECT_EQ(fixtures::pos_max(s.lctx.get()), start[target] - 1);
        EXPECT_EQ(fixtures::seq_state(s.lctx.get(), 0), memory_after(target))
            << "memory differs from the chunks before " << target << " alone";
        resume_and_check(s, r);
    }

    bool                   audio = false;
    int32_t                n_batch  = 0;
    uint32_t               n_ubatch = 0;
    chunks_ptr             chunks;
    size_t                 n_chunks = 0;
    std::vector<size_t>    media;      // indices of the media chunks
    size_t                 target = 0; // the chunk the stops land in: media[1]
    std::vector<llama_pos> start;      // first position of each chunk
    llama_pos              want_n_past = 0;
    std::vector<float>     want;
};

TEST_F(MtmdMrope, MatchesUpstreamHelper) {
    setup s(n_batch, n_ubatch);
    llama_cancel_mtmd_result r;
    ASSERT_EQ(s.eval(chunks.get(), 0, 0, &r), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_chunks_done, static_cast<int32_t>(n_chunks));
    EXPECT_EQ(r.n_past, want_n_past) << "n_past advances by mtmd_input_chunk_get_n_pos";
    EXPECT_EQ(fixtures::pos_max(s.lctx.get()), want_n_past - 1);
    expect_logits(common::last_logits(s.lctx.get()), want, "logits differ from mtmd_helper_eval_chunks");
    EXPECT_EQ(fixtures::seq_state(s.lctx.get(), 0), memory_after(n_chunks)) << "memory differs from upstream's";
}

TEST_F(MtmdMrope, StopInsideEncodeRemovesNothingOfEarlierChunks) {
    std::vector<int> encode_asks;
    std::vector<int> ends;
    ASSERT_NO_FATAL_FAILURE(count(&encode_asks, &ends));
    ASSERT_GT(encode_asks[target], 10);
    const int before = asks_before(target, encode_asks);

    setup s(n_batch, n_ubatch);
    s.enc_trig.at = before + encode_asks[target] / 2; // in the middle of the second media chunk's encode
    llama_cancel_mtmd_result r;
    ASSERT_EQ(s.eval(chunks.get(), 0, 0, &r), LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_EQ(r.n_chunks_done, static_cast<int32_t>(target));
    EXPECT_EQ(r.n_past, start[target]) << "n_past after an image counts its n_pos";
    EXPECT_EQ(fixtures::pos_max(s.lctx.get()), start[target] - 1);
    EXPECT_TRUE(llama_cancel_hook_stopped(s.enc_hook.get())) << "the hook stopped the clip graph";
    EXPECT_LT(s.enc_trig.calls, before + encode_asks[target]) << "the encode stopped early";
    EXPECT_EQ(fixtures::seq_state(s.lctx.get(), 0), memory_after(target))
        << "memory differs from the chunks before " << target << " alone";
    resume_and_check(s, r);
}

TEST_F(MtmdMrope, StopInsideEmbeddingDecodeRemovesTheChunkWhole) {
    // n_batch smaller than a media chunk: its decode takes several llama_cancel_decode calls
    ASSERT_NO_FATAL_FAILURE(reference(audio ? 64 : 8, audio ? 64 : 8));
    ASSERT_GT(media_tokens(target), n_batch);
    stop_inside_second_media_decode(1);
}

// One llama_cancel_decode call over more than n_ubatch embeddings with a hook goes one ubatch per
// llama_decode call: each of those slices needs its own copy of the 4 position sections.
TEST_F(MtmdMrope, UbatchSlicesInsideOneDecodeKeepThePositions) {
    ASSERT_NO_FATAL_FAILURE(reference(64, audio ? 16 : 8));
    ASSERT_GT(std::min(media_tokens(1), n_batch), static_cast<int32_t>(n_ubatch)) << "a media slice spans ubatches";
    setup s(n_batch, n_ubatch);
    llama_cancel_mtmd_result r;
    ASSERT_EQ(s.eval(chunks.get(), 0, 0, &r), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_past, want_n_past);
    expect_logits(common::last_logits(s.lctx.get()), want, "logits differ from mtmd_helper_eval_chunks");
    stop_inside_second_media_decode(1);
}

// A stop-time budget slices the causal embedding decodes by measured node times: slice sizes vary
// from run to run, so the logits differ from upstream's in the last bits (other ubatch shapes).
// On the images (24 tokens) that drift stays under 1e-4 (measured 2e-5..8e-5) where slices with
// offset position sections give 3.4e-3; on 750-token audio chunks it reaches 6e-3, so there the
// positions of these slices rest on UbatchSlicesInsideOneDecodeKeepThePositions (the same copy).
TEST_F(MtmdMrope, BudgetSlicesKeepThePositions) {
    setup s(n_batch, n_ubatch);
    llama_cancel_mtmd_result r;
    ASSERT_EQ(s.eval(chunks.get(), 0, 0, &r, 0.05f), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_past, want_n_past);
    EXPECT_EQ(fixtures::pos_max(s.lctx.get()), want_n_past - 1);
    EXPECT_GT(static_cast<int>(s.dec_trig.graph_ends.size()), first_graph_of(n_chunks, graphs_per_chunk()))
        << "the budget sliced the decodes";
    if (!audio) {
        EXPECT_LT(fixtures::relative_difference(common::last_logits(s.lctx.get()), want), 5e-4);
    }
}

namespace {

// The setup under test (LLAMA_CANCEL_BACKEND, the CPU when unset) and the M-RoPE text model on it.
const auto * const g_environment = fixtures::add_backend_environment([] {
    fixtures::backend_environment_options o;
    o.model_env       = "LLAMA_CANCEL_MROPE_MODEL";
    o.model_what      = "an M-RoPE text model from scripts/make_model.py (--arch qwen2vl or qwen35)";
    o.default_backend = "cpu";
    return o;
}());

} // namespace
