// llama_cancel_tts_* and llama_cancel_mtmd_gen_audio_process (issue 32): text-to-speech stopped
// inside each of its steps (the prompt's decode, GEN_CODE, the backbone's feedback decode, GEN_WAV,
// a Pocket-TTS chunk's prompt) through the hooks and through the stateless callbacks, on the pair in
// LLAMA_CANCEL_TTS_MODEL / LLAMA_CANCEL_TTS_MMPROJ (scripts/make_tts.py), on the setup in
// LLAMA_CANCEL_BACKEND (the CPU when unset). Every stop is CANCELLED at the step it names, the
// backbone's memory is byte for byte a clean run's of the committed frames, and the resumed
// generation's PCM is the uninterrupted run's, bit for bit on the CPU. Stops come from a callback
// chained behind the hooks at a counted node; no timing.
#include "fixtures.h"
#include "mtmd_media.h"

#include "llama-cancel.h"
#include "mtmd-helper.h"
#include "mtmd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

using fixtures::test_backend;

using mtmd_ptr = mtmd::context_ptr;
struct tts_deleter { void operator()(llama_cancel_tts * t) const { llama_cancel_tts_free(t); } };
using tts_ptr = std::unique_ptr<llama_cancel_tts, tts_deleter>;

constexpr int32_t k_window = 3; // frames per GEN_WAV: several windows in a short generation
constexpr int32_t k_frames = 7; // frames in all: windows 3, 3 and the final 1

bool on_cpu() { return test_backend().name() == "cpu"; }
// Where an uninterrupted generation repeats itself bit for bit: the CPU, and RPC (a CPU server).
bool exact_here() { return on_cpu() || test_backend().name().rfind("rpc", 0) == 0; }

// A text over 50 tokens: Pocket-TTS splits it into chunks.
// Pocket-TTS on the tiny pair: 8 tokens, then 47 (over 50 together): two chunks.
const char * const k_long_text =
    "Hello world. Hello world and more words here and there and everywhere again and again until the end.";

mtmd_ptr make_mtmd(ggml_backend_sched_eval_callback cb, void * data) {
    mtmd_helper_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    mtmd_context_params mp = mtmd_context_params_default();
    mp.use_gpu           = !on_cpu();
    mp.warmup            = false;
    mp.print_timings     = false;
    mp.n_threads         = 2;
    mp.cb_eval           = cb;
    mp.cb_eval_user_data = data;
    return mtmd_ptr(mtmd_init_from_file(fixtures::env("LLAMA_CANCEL_TTS_MMPROJ").c_str(), test_backend().model.get(), mp));
}

common::context_ptr make_lctx(llama_cancel_hook * hook, ggml_backend_sched_eval_callback cb = nullptr,
                              void * data = nullptr) {
    common::context_options o = fixtures::context_options(16, 16, 1, cb, data);
    o.embeddings              = true;
    return fixtures::make_backend_context(test_backend().model.get(), hook, o);
}

bool is_pocket(mtmd_context * mctx) {
    return mtmd_gen_audio_get_info(mctx).type == MTMD_GEN_AUDIO_TYPE_POCKETTTS;
}

// The hooks of a generation, each chaining a trigger that stores the byte at a chosen node.
struct setup {
    fixtures::node_trigger gen_trig, dec_trig;
    int8_t                 byte = 0;
    common::hook_ptr       mtmd_hook, dec_hook;
    mtmd_ptr               mctx;
    common::context_ptr    lctx;
    tts_ptr                tts;

    // `gen_interval_ms` > 0: mtmd_hook's interval (the default otherwise).
    // `sampler`: Qwen3-TTS codebook 0's chain (NULL: the default, greedy).
    explicit setup(const char * text = "Hello world, this is a test.", int32_t max_frames = k_frames,
                   const mtmd_bitmap * voice = nullptr, double gen_interval_ms = 0.0, llama_sampler * sampler = nullptr) {
        gen_trig.byte = &byte;
        dec_trig.byte = &byte;
        mtmd_hook      = common::make_hook(fixtures::node_trigger::eval_cb, &gen_trig, gen_interval_ms);
        dec_hook      = fixtures::make_hook(&dec_trig);
        mctx          = make_mtmd(llama_cancel_hook_eval_callback, mtmd_hook.get());
        lctx          = make_lctx(dec_hook.get());
        llama_cancel_tts_params p = llama_cancel_tts_default_params();
        p.text       = text;
        p.seed       = 42;
        p.window     = k_window;
        p.max_frames = max_frames;
        p.voice      = voice;
        p.sampler    = sampler;
        llama_cancel_tts_result r{};
        tts.reset(llama_cancel_tts_init(lctx.get(), mctx.get(), &p, &r));
        EXPECT_NE(tts, nullptr) << r.message;
    }

    llama_cancel_tts_run_params run(int32_t n_frames = 0) {
        llama_cancel_tts_run_params rp = llama_cancel_tts_run_default_params();
        rp.byte      = &byte;
        rp.hook      = dec_hook.get();
        rp.mtmd_hook = mtmd_hook.get();
        rp.n_frames  = n_frames;
        return rp;
    }

    llama_cancel_gen_audio_params gen_audio() {
        return llama_cancel_gen_audio_params{&byte, mtmd_hook.get()};
    }

    int32_t generate(llama_cancel_tts_result * r, int32_t n_frames = 0) {
        const llama_cancel_tts_run_params rp = run(n_frames);
        return llama_cancel_tts_generate(tts.get(), &rp, r);
    }

    std::vector<float> pcm() const {
        int64_t       n = 0;
        const float * p = llama_cancel_tts_get_pcm(tts.get(), &n);
        return p == nullptr ? std::vector<float>{} : std::vector<float>(p, p + n);
    }

    void rearm() {
        byte = 0;
        gen_trig.reset();
        dec_trig.reset();
    }
};

// The same PCM: bit for bit on the CPU and over RPC. On Vulkan (llvmpipe) two uninterrupted Qwen3-TTS runs
// already differ (a last-bit difference flips a sampled code, and the audio with it), so there the
// same number of samples, the largest difference printed.
bool same(const std::vector<float> & a, const std::vector<float> & b) {
    if (a.empty() || b.empty()) {
        ADD_FAILURE() << "PCM to compare is missing (" << a.size() << " and " << b.size() << " samples)";
        return false;
    }
    if (a.size() != b.size()) {
        return false;
    }
    if (exact_here()) {
        return std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
    }
    double worst = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
        worst = std::max(worst, static_cast<double>(std::fabs(a[i] - b[i])));
    }
    std::printf("largest PCM difference on %s: %g\n", test_backend().name().c_str(), worst);
    return true;
}

class Tts : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        setup s;
        llama_cancel_tts_result r{};
        ASSERT_EQ(s.generate(&r), LLAMA_CANCEL_OK) << r.message;
        ASSERT_EQ(r.finished, 1);
        ASSERT_EQ(r.n_frames, k_frames);
        ASSERT_EQ(r.n_frames_pending, 0);
        want_     = new std::vector<float>(s.pcm());
        want_pos_ = fixtures::pos_max(s.lctx.get());
    }
    static void TearDownTestSuite() {
        delete want_;
        want_ = nullptr;
    }

    // Resumes `s` after its stop and checks the whole generation against the uninterrupted one.
    static void resume_and_check(setup & s) {
        s.rearm();
        llama_cancel_tts_result r{};
        ASSERT_EQ(s.generate(&r), LLAMA_CANCEL_OK) << r.message;
        EXPECT_EQ(r.finished, 1);
        EXPECT_EQ(r.n_frames, k_frames);
        EXPECT_EQ(fixtures::pos_max(s.lctx.get()), want_pos_);
        EXPECT_TRUE(same(s.pcm(), *want_)) << "the resumed generation's PCM is not the uninterrupted run's";
    }

    // The memory a clean generation of `n_frames` frames leaves, byte for byte.
    static std::vector<uint8_t> clean_state(int32_t n_frames) {
        setup s;
        llama_cancel_tts_result r{};
        EXPECT_EQ(s.generate(&r, n_frames), LLAMA_CANCEL_OK) << r.message;
        EXPECT_EQ(r.n_frames, n_frames);
        return fixtures::seq_state(s.lctx.get(), 0);
    }

    static std::vector<float> * want_;
    static llama_pos            want_pos_;
};

std::vector<float> * Tts::want_     = nullptr;
llama_pos            Tts::want_pos_ = -1;

TEST_F(Tts, UninterruptedRunsAgreeAndEveryFrameIsInThePcm) {
    setup s;
    llama_cancel_tts_result r{};
    ASSERT_EQ(s.generate(&r), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.stop_reason, LLAMA_CANCEL_STOP_LENGTH);
    EXPECT_EQ(r.sample_rate, 24000);
    EXPECT_EQ(r.n_samples, static_cast<int64_t>(k_frames) * 1920);
    EXPECT_EQ(r.n_chunks_done, 1) << "one text chunk, finished";
    EXPECT_TRUE(same(s.pcm(), *want_));
    EXPECT_EQ(r.reach, LLAMA_CANCEL_REACH_GRAPH) << "a hook bound to the backbone's context";
    EXPECT_EQ(r.mtmd_reach, LLAMA_CANCEL_REACH_GRAPH) << "a hook bound to the generation projector's";
    // Finished: a further call changes nothing.
    ASSERT_EQ(s.generate(&r), LLAMA_CANCEL_OK);
    EXPECT_EQ(r.n_frames, k_frames);
}

TEST_F(Tts, StopInsidePromptDecodeKeepsItsCommittedRows) {
    setup s;
    s.dec_trig.at = 2;
    llama_cancel_tts_result r{};
    ASSERT_EQ(s.generate(&r), LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_EQ(r.step, LLAMA_CANCEL_TTS_STEP_PROMPT);
    EXPECT_EQ(r.n_frames, 0);
    resume_and_check(s);
}

// Frames 1..k committed, then a stop inside frame k+1's GEN_CODE, its backbone decode, or the
// GEN_WAV that frame k+1 completes: the generation holds k frames, memory a clean run's of k.
// `last`: the stopped call's result, where the generation stands.
void stop_in_frame(setup & s, int32_t before, bool in_gen, int32_t step, int32_t asks_in,
                   llama_cancel_tts_result * last = nullptr) {
    llama_cancel_tts_result r{};
    ASSERT_EQ(s.generate(&r, before), LLAMA_CANCEL_OK) << r.message;
    ASSERT_EQ(r.n_frames, before);
    fixtures::node_trigger & trig = in_gen ? s.gen_trig : s.dec_trig;
    trig.at = trig.calls + asks_in;
    ASSERT_EQ(s.generate(&r, 1), LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_EQ(r.step, step);
    EXPECT_EQ(r.status, LLAMA_CANCEL_CANCELLED);
    const int32_t kept = step == LLAMA_CANCEL_TTS_STEP_GEN_WAV ? before + 1 : before;
    EXPECT_EQ(r.n_frames, kept);
    if (last != nullptr) {
        *last = r;
    }
}

TEST_F(Tts, StopInsideGenCodeLeavesTheFramesBefore) {
    setup s;
    stop_in_frame(s, 1, true, LLAMA_CANCEL_TTS_STEP_GEN_CODE, 2);
    EXPECT_EQ(fixtures::seq_state(s.lctx.get(), 0), clean_state(1)) << "memory is not a clean run's of 1 frame";
    resume_and_check(s);
}

// A GEN_CODE call whose last one finished within its checkpoint interval (half the hook's) runs
// held: nothing stops it inside, every node of it is asked, and a byte set there is read as it
// returns: CANCELLED at GEN_CODE, its codes discarded, memory a clean run's of the frames before,
// the resume exact. Past that interval (a hook of 1 us), the same byte stops it at that node.
TEST_F(Tts, GenCodeWithinItsIntervalRunsHeldAndStopsAsItReturns) {
    for (const bool held : {true, false}) {
        SCOPED_TRACE(held ? "held" : "with checkpoints");
        setup s("Hello world, this is a test.", k_frames, nullptr, held ? 1e6 : 1e-3);
        llama_cancel_tts_result r{};
        ASSERT_EQ(s.generate(&r, 1), LLAMA_CANCEL_OK) << r.message; // the first GEN_CODE, timed
        int before = s.gen_trig.calls;
        ASSERT_EQ(s.generate(&r, 1), LLAMA_CANCEL_OK) << r.message; // frame 2: one GEN_CODE, no GEN_WAV
        const int whole = s.gen_trig.calls - before;
        ASSERT_GT(whole, 8) << "frame 2's GEN_CODE asked too few nodes to tell a held graph";
        before          = s.gen_trig.calls;
        s.gen_trig.at   = before + 3;
        ASSERT_EQ(s.generate(&r, 1), LLAMA_CANCEL_CANCELLED) << r.message;
        EXPECT_EQ(r.step, LLAMA_CANCEL_TTS_STEP_GEN_CODE);
        EXPECT_EQ(r.n_frames, 2);
        EXPECT_EQ(s.gen_trig.calls - before, held ? whole : 3);
        EXPECT_EQ(fixtures::seq_state(s.lctx.get(), 0), clean_state(2)) << "memory is not a clean run's of 2 frames";
        resume_and_check(s);
    }
}

TEST_F(Tts, StopInsideBackboneDecodeLeavesTheFramesBefore) {
    setup s;
    stop_in_frame(s, 2, false, LLAMA_CANCEL_TTS_STEP_BACKBONE, 2);
    EXPECT_EQ(fixtures::seq_state(s.lctx.get(), 0), clean_state(2)) << "memory is not a clean run's of 2 frames";
    resume_and_check(s);
}

TEST_F(Tts, StopInsideGenWavKeepsTheWindowsPcmOut) {
    // Asks of a call's GEN_CODE graphs (its reseed and the frame's), so that the trigger lands past
    // them, inside the window's GEN_WAV.
    llama_cancel_tts_result r{};
    int per_gen_code = 0;
    {
        setup probe;
        ASSERT_EQ(probe.generate(&r, 1), LLAMA_CANCEL_OK);
        per_gen_code = probe.gen_trig.calls;
    }
    ASSERT_GT(per_gen_code, 0) << "no GEN_CODE node reached the hook bound to mctx";
    setup s;
    stop_in_frame(s, k_window - 1, true, LLAMA_CANCEL_TTS_STEP_GEN_WAV, per_gen_code + 3, &r);
    EXPECT_EQ(r.n_samples, 0) << "a stopped window gave PCM";
    EXPECT_EQ(r.n_frames_pending, k_window);
    resume_and_check(s);
}

TEST_F(Tts, PartialAudioIsTheFinishedWindows) {
    setup s;
    llama_cancel_tts_result r{};
    ASSERT_EQ(s.generate(&r, k_window + 1), LLAMA_CANCEL_OK);
    EXPECT_EQ(r.n_frames_pending, 1);
    ASSERT_EQ(r.n_samples, static_cast<int64_t>(k_window) * 1920);
    const std::vector<float> part = s.pcm();
    EXPECT_TRUE(same(part, std::vector<float>(want_->begin(), want_->begin() + static_cast<std::ptrdiff_t>(part.size()))));
    // flush: the pending frame too, and the generation is over.
    ASSERT_EQ(llama_cancel_tts_flush(s.tts.get(), nullptr, &r), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_samples, static_cast<int64_t>(k_window + 1) * 1920);
    EXPECT_EQ(r.finished, 1);
}

TEST_F(Tts, ByteSetBetweenStepsAndOnFrameStopAtOnce) {
    setup s;
    s.byte = 1;
    llama_cancel_tts_result r{};
    ASSERT_EQ(s.generate(&r), LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.step, LLAMA_CANCEL_TTS_STEP_BETWEEN);
    EXPECT_EQ(fixtures::pos_max(s.lctx.get()), -1) << "a byte set on entry decoded something";
    s.rearm();
    llama_cancel_tts_run_params rp = s.run();
    rp.on_frame      = [](int32_t n, int64_t, void *) { return n < 3; };
    ASSERT_EQ(llama_cancel_tts_generate(s.tts.get(), &rp, &r), LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.n_frames, 3);
    resume_and_check(s);
}

// The stateless names alone, as an FFI host binds them: the byte as user data of
// llama_cancel_eval_callback on both contexts and of llama_cancel_abort_callback on the backbone's.
// A trigger ahead of it in mctx's cb_eval stores the byte inside a GEN_WAV graph.
struct stateless_gate {
    fixtures::node_trigger trig;
    int8_t                 byte        = 0;
    bool                   trig_wants  = false; // the trigger asked for the node being computed
    static bool eval(ggml_tensor * t, bool ask, void * data) {
        auto * g = static_cast<stateless_gate *>(data);
        if (ask) {
            g->trig_wants  = fixtures::node_trigger::eval_cb(t, true, &g->trig);
            const bool ours = llama_cancel_eval_callback(t, true, &g->byte);
            return g->trig_wants || ours;
        }
        if (g->trig_wants) {
            g->trig_wants = false;
            fixtures::node_trigger::eval_cb(t, false, &g->trig); // stores the byte
        }
        return llama_cancel_eval_callback(t, false, &g->byte);
    }
};

TEST_F(Tts, StatelessNamesStopGenWavAndResumeExactly) {
    stateless_gate gate;
    gate.trig.byte = &gate.byte;
    mtmd_ptr mctx  = make_mtmd(stateless_gate::eval, &gate);
    common::context_ptr lctx = make_lctx(nullptr, llama_cancel_eval_callback, &gate.byte);
    llama_set_abort_callback(lctx.get(), llama_cancel_abort_callback, &gate.byte);
    llama_cancel_tts_params p = llama_cancel_tts_default_params();
    p.text       = "Hello world, this is a test.";
    p.seed       = 42;
    p.window     = k_window;
    p.max_frames = k_frames;
    llama_cancel_tts_result r{};
    tts_ptr tts(llama_cancel_tts_init(lctx.get(), mctx.get(), &p, &r));
    ASSERT_NE(tts, nullptr) << r.message;
    llama_cancel_tts_run_params rp = llama_cancel_tts_run_default_params();
    rp.byte     = &gate.byte;
    rp.n_frames = 1;
    ASSERT_EQ(llama_cancel_tts_generate(tts.get(), &rp, &r), LLAMA_CANCEL_OK) << r.message;
    const int per_call = gate.trig.calls; // a call's GEN_CODE asks: its reseed and one frame's
    rp.n_frames        = k_window - 2;
    ASSERT_EQ(llama_cancel_tts_generate(tts.get(), &rp, &r), LLAMA_CANCEL_OK) << r.message;
    gate.trig.at = gate.trig.calls + per_call + 3; // past frame k_window's GEN_CODE, inside its GEN_WAV
    rp.n_frames  = 1;
    ASSERT_EQ(llama_cancel_tts_generate(tts.get(), &rp, &r), LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_EQ(r.step, LLAMA_CANCEL_TTS_STEP_GEN_WAV);
    EXPECT_EQ(r.n_samples, 0);
    gate.byte = 0;
    gate.trig.reset();
    rp.n_frames = 0;
    ASSERT_EQ(llama_cancel_tts_generate(tts.get(), &rp, &r), LLAMA_CANCEL_OK) << r.message;
    int64_t       n   = 0;
    const float * pcm = llama_cancel_tts_get_pcm(tts.get(), &n);
    ASSERT_NE(pcm, nullptr);
    EXPECT_TRUE(same(std::vector<float>(pcm, pcm + n), *want_));
}

// Inputs of direct llama_cancel_mtmd_gen_audio_process calls: GEN_CODE over a constant hidden
// state, GEN_WAV over what a GEN_CODE gave (codes for Qwen3-TTS, latents for Pocket-TTS). The
// vectors the inputs point into live here.
struct gen_inputs {
    std::vector<float>   h;
    std::vector<int32_t> codes;
    std::vector<float>   feats;

    mtmd_gen_inp code(mtmd_context * mctx) {
        h.assign(static_cast<size_t>(llama_model_n_embd(test_backend().model.get())), 0.01f);
        mtmd_gen_inp in = mtmd_gen_inp_default(mctx);
        in.type         = MTMD_GEN_PROCESS_TYPE_GEN_CODE;
        in.embd         = h.data();
        in.seed         = 7;
        return in;
    }
    mtmd_gen_inp wav(mtmd_context * mctx, const mtmd_gen_out & out) {
        codes.assign(out.codes, out.codes + out.n_codes);
        feats.assign(out.feats, out.feats + out.n_feats);
        mtmd_gen_inp in = mtmd_gen_inp_default(mctx);
        in.type         = MTMD_GEN_PROCESS_TYPE_GEN_WAV;
        in.seed         = 7;
        if (!codes.empty()) {
            in.codes   = codes.data();
            in.n_codes = codes.size();
        } else {
            in.feats   = feats.data();
            in.n_feats = feats.size();
        }
        return in;
    }
};

TEST_F(Tts, GenAudioProcessReportsAStoppedGraphAndLeavesTheStateToTheCaller) {
    setup s;
    gen_inputs   in;
    mtmd_gen_inp code = in.code(s.mctx.get());
    llama_cancel_gen_audio_params rp = s.gen_audio();
    llama_cancel_gen_audio_result r{};
    mtmd_gen_out out{};
    ASSERT_EQ(llama_cancel_mtmd_gen_audio_process(s.mctx.get(), &code, &out, &rp, &r), LLAMA_CANCEL_OK) << r.message;
    mtmd_gen_inp wav = in.wav(s.mctx.get(), out);
    ASSERT_EQ(llama_cancel_mtmd_gen_audio_process(s.mctx.get(), &wav, &out, &rp, &r), LLAMA_CANCEL_OK);
    const std::vector<float> want(out.audio, out.audio + out.n_samples);
    s.gen_trig.at = s.gen_trig.calls + 3;
    ASSERT_EQ(llama_cancel_mtmd_gen_audio_process(s.mctx.get(), &wav, &out, &rp, &r), LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.step, LLAMA_CANCEL_TTS_STEP_GEN_WAV);
    EXPECT_EQ(out.audio, nullptr);
    EXPECT_EQ(out.n_samples, 0u);
    s.rearm();
    ASSERT_EQ(llama_cancel_mtmd_gen_audio_process(s.mctx.get(), &wav, &out, &rp, &r), LLAMA_CANCEL_OK);
    EXPECT_TRUE(same(std::vector<float>(out.audio, out.audio + out.n_samples), want));
    // Bad input: a clear error, nothing run.
    EXPECT_EQ(llama_cancel_mtmd_gen_audio_process(s.mctx.get(), nullptr, &out, &rp, &r), LLAMA_CANCEL_ERROR);
    EXPECT_STRNE(r.message, "");
}

// The same held GEN_CODE through llama_cancel_mtmd_gen_audio_process: the hook keeps what the last
// call of that graph took, so a host's own frame loop gets it too; a stopped held call returns
// CANCELLED with its outputs cleared.
TEST_F(Tts, GenAudioProcessHoldsAGenCodeThatFinishedWithinItsInterval) {
    setup s("Hello world, this is a test.", k_frames, nullptr, 1e6);
    gen_inputs   in;
    mtmd_gen_inp code = in.code(s.mctx.get());
    const llama_cancel_gen_audio_params rp = s.gen_audio();
    llama_cancel_gen_audio_result r{};
    mtmd_gen_out out{};
    ASSERT_EQ(llama_cancel_mtmd_gen_audio_process(s.mctx.get(), &code, &out, &rp, &r), LLAMA_CANCEL_OK) << r.message;
    int before = s.gen_trig.calls;
    ASSERT_EQ(llama_cancel_mtmd_gen_audio_process(s.mctx.get(), &code, &out, &rp, &r), LLAMA_CANCEL_OK) << r.message;
    const int whole = s.gen_trig.calls - before;
    ASSERT_GT(whole, 8);
    before        = s.gen_trig.calls;
    s.gen_trig.at = before + 3;
    ASSERT_EQ(llama_cancel_mtmd_gen_audio_process(s.mctx.get(), &code, &out, &rp, &r), LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.step, LLAMA_CANCEL_TTS_STEP_GEN_CODE);
    EXPECT_EQ(s.gen_trig.calls - before, whole) << "the held graph did not run whole";
    EXPECT_EQ(out.embd, nullptr);
}

// A frame's GEN_CODE is a call of tens of ms that a host expects to stop within the interval: its
// checkpoints go half the interval apart, GEN_WAV's the whole interval (or more, stretched for RPC).
TEST_F(Tts, GenCodeCheckpointsAtHalfTheInterval) {
    setup s;
    gen_inputs         in;
    const mtmd_gen_inp code = in.code(s.mctx.get());
    const llama_cancel_gen_audio_params rp = s.gen_audio();
    llama_cancel_gen_audio_result r{};
    mtmd_gen_out out{};
    ASSERT_EQ(llama_cancel_mtmd_gen_audio_process(s.mctx.get(), &code, &out, &rp, &r), LLAMA_CANCEL_OK) << r.message;
    EXPECT_DOUBLE_EQ(llama_cancel_hook_get_stats(s.mtmd_hook.get()).interval_ms, 0.5 * LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS);
    const mtmd_gen_inp wav = in.wav(s.mctx.get(), out);
    ASSERT_EQ(llama_cancel_mtmd_gen_audio_process(s.mctx.get(), &wav, &out, &rp, &r), LLAMA_CANCEL_OK) << r.message;
    EXPECT_GE(llama_cancel_hook_get_stats(s.mtmd_hook.get()).interval_ms, LLAMA_CANCEL_HOOK_DEFAULT_INTERVAL_MS);
}

TEST_F(Tts, BadArgumentsAreClearErrors) {
    setup s;
    llama_cancel_tts_result r{};
    llama_cancel_tts_params p = llama_cancel_tts_default_params();
    EXPECT_EQ(llama_cancel_tts_init(s.lctx.get(), s.mctx.get(), &p, &r), nullptr);
    EXPECT_EQ(r.status, LLAMA_CANCEL_ERROR);
    EXPECT_STRNE(r.message, "") << "no text";
    p.text = "Hello.";
    ASSERT_EQ(s.generate(&r, 1), LLAMA_CANCEL_OK);
    EXPECT_EQ(llama_cancel_tts_init(s.lctx.get(), s.mctx.get(), &p, &r), nullptr) << "sequence 0 is not empty";
    EXPECT_NE(std::string(r.message).find("not empty"), std::string::npos) << r.message;
    p.lang = "klingon";
    EXPECT_EQ(llama_cancel_tts_init(s.lctx.get(), s.mctx.get(), &p, &r), nullptr);
    EXPECT_EQ(llama_cancel_tts_generate(nullptr, nullptr, &r), LLAMA_CANCEL_ERROR);
    // The wrong hook named: an error that computes nothing more.
    common::hook_ptr other = fixtures::make_hook(nullptr);
    llama_cancel_tts_run_params rp = s.run();
    rp.mtmd_hook = other.get();
    const llama_pos before = fixtures::pos_max(s.lctx.get());
    EXPECT_EQ(llama_cancel_tts_generate(s.tts.get(), &rp, &r), LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::string(r.message).find("mtmd_hook"), std::string::npos) << r.message;
    EXPECT_EQ(fixtures::pos_max(s.lctx.get()), before);
    resume_and_check(s);
}

// A voice reference: the projector's audio encoder runs first (a clip graph of its own), its rows go
// into the prompt; a stop inside it is CANCELLED at VOICE, decodes nothing, and the resume is the
// uninterrupted voiced run.
TEST_F(Tts, StopInsideTheVoiceEncodeResumesExactly) {
    std::unique_ptr<mtmd_bitmap, void (*)(mtmd_bitmap *)> voice(fixtures::make_media(true, 3), mtmd_bitmap_free);
    setup ref("Hello world, this is a test.", k_frames, voice.get());
    llama_cancel_tts_result r{};
    ASSERT_EQ(ref.generate(&r), LLAMA_CANCEL_OK) << r.message;
    const llama_pos with_voice = fixtures::pos_max(ref.lctx.get());
    EXPECT_GT(with_voice, want_pos_) << "the voice added no prompt row";
    setup s("Hello world, this is a test.", k_frames, voice.get());
    s.gen_trig.at = 2;
    ASSERT_EQ(s.generate(&r), LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_EQ(r.step, LLAMA_CANCEL_TTS_STEP_VOICE);
    EXPECT_EQ(fixtures::pos_max(s.lctx.get()), -1) << "a stopped voice encode decoded something";
    s.rearm();
    ASSERT_EQ(s.generate(&r), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(fixtures::pos_max(s.lctx.get()), with_voice);
    EXPECT_TRUE(same(s.pcm(), ref.pcm()));
}

// Qwen3-TTS's codebook 0 as a caller's chain sees it: a sampler that records whether every token
// the model suppresses came with a -inf logit and, at its apply number `rogue_at`, picks `rogue`
// whatever its logit (as a chain that ignores the candidates might); otherwise the greedy pick,
// unless `select` is false (it only looks, and the chain's next sampler picks).
struct code0_probe {
    std::vector<llama_token> suppressed;
    bool                     select   = true;
    int32_t                  applied  = 0;
    int32_t                  rogue_at = -1;
    llama_token              rogue    = LLAMA_TOKEN_NULL;
    bool                     masked   = true;
    llama_sampler_i          iface{};
    llama_sampler *          smpl = nullptr;

    explicit code0_probe(const llama_model * model, bool pick = true) : select(pick) {
        int32_t             n = 0;
        const llama_token * t = llama_vocab_get_suppress_tokens(llama_model_get_vocab(model), &n);
        suppressed.assign(t, t + (t != nullptr ? n : 0));
        iface.apply = [](llama_sampler * s, llama_token_data_array * a) { static_cast<code0_probe *>(s->ctx)->apply(a); };
        iface.free  = [](llama_sampler *) {}; // the test owns it
        smpl        = llama_sampler_init(&iface, this);
    }
    ~code0_probe() { llama_sampler_free(smpl); }

    void apply(llama_token_data_array * a) {
        for (size_t i = 0; i < a->size; ++i) {
            const bool is_suppressed =
                std::find(suppressed.begin(), suppressed.end(), a->data[i].id) != suppressed.end();
            masked = masked && (!is_suppressed || std::isinf(a->data[i].logit));
        }
        if (select) {
            size_t best = 0;
            for (size_t i = 0; i < a->size; ++i) {
                const bool pick = applied == rogue_at ? a->data[i].id == rogue : a->data[i].logit > a->data[best].logit;
                best = pick ? i : best;
            }
            a->selected = static_cast<int64_t>(best);
        }
        ++applied;
    }
};

llama_token raw_argmax(llama_context * lctx) {
    const float * l = llama_get_logits_ith(lctx, -1);
    const int32_t n = llama_vocab_n_tokens(llama_model_get_vocab(llama_get_model(lctx)));
    return l == nullptr ? LLAMA_TOKEN_NULL : static_cast<llama_token>(std::max_element(l, l + n) - l);
}

// Qwen3-TTS only (tests/tts.cmake filters it out elsewhere): the tiny talker, written as the
// converter writes it, prefers a token it suppresses at every frame; the default, a greedy chain and
// a top-k chain still generate to the end, each chain seeing those tokens at -inf, and the greedy
// chain gives the default's PCM.
TEST_F(Tts, Codebook0KeepsToTheCodesTheModelAllows) {
    setup first;
    ASSERT_FALSE(is_pocket(first.mctx.get())) << "a Qwen3-TTS test";
    llama_cancel_tts_result r{};
    ASSERT_EQ(first.generate(&r, 1), LLAMA_CANCEL_OK) << r.message;
    code0_probe look(test_backend().model.get(), false);
    ASSERT_FALSE(look.suppressed.empty()) << "the talker has no tokenizer.ggml.suppress_tokens";
    const llama_token argmax = raw_argmax(first.lctx.get());
    EXPECT_NE(std::find(look.suppressed.begin(), look.suppressed.end(), argmax), look.suppressed.end())
        << "the talker's own argmax " << argmax << " is not suppressed: the test model hides what it tests";

    for (const bool greedy : {true, false}) {
        SCOPED_TRACE(greedy ? "greedy chain" : "top-k chain");
        code0_probe     seen(test_backend().model.get(), false);
        llama_sampler * chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
        llama_sampler_chain_add(chain, seen.smpl);
        if (greedy) {
            llama_sampler_chain_add(chain, llama_sampler_init_greedy());
        } else {
            llama_sampler_chain_add(chain, llama_sampler_init_top_k(40));
            llama_sampler_chain_add(chain, llama_sampler_init_dist(7));
        }
        {
            setup s("Hello world, this is a test.", k_frames, nullptr, 0.0, chain);
            ASSERT_EQ(s.generate(&r), LLAMA_CANCEL_OK) << r.message;
            EXPECT_EQ(r.finished, 1);
            EXPECT_EQ(r.n_frames, k_frames);
            EXPECT_EQ(seen.applied, k_frames);
            EXPECT_TRUE(seen.masked) << "a suppressed token reached the caller's chain with a finite logit";
            if (greedy) {
                EXPECT_TRUE(same(s.pcm(), *want_)) << "a greedy chain gave other audio than the default";
            }
        }
        llama_sampler_chain_remove(chain, 0); // the probe is the test's
        llama_sampler_free(chain);
    }
}

// A code0 code2wav would refuse (a chain that picked a -inf candidate: a suppressed special, or a
// text token) is an ERROR at that frame, before its GEN_CODE: the frames before it are kept (memory
// a clean run's of them, their finished window's PCM), and the next call samples again and
// generates the uninterrupted run.
TEST_F(Tts, ACodeCode2WavWouldRefuseIsAnErrorThatKeepsTheFramesBefore) {
    code0_probe probe(test_backend().model.get());
    ASSERT_FALSE(probe.suppressed.empty()) << "the talker has no tokenizer.ggml.suppress_tokens";
    struct rogue_case { llama_token token; const char * says; };
    for (const rogue_case c : {rogue_case{probe.suppressed.back(), "suppress"}, rogue_case{5, "no codec code"}}) {
        SCOPED_TRACE(c.says);
        probe.applied  = 0;
        probe.rogue_at = k_window; // frame k_window + 1
        probe.rogue    = c.token;
        setup s("Hello world, this is a test.", k_frames, nullptr, 0.0, probe.smpl);
        ASSERT_FALSE(is_pocket(s.mctx.get())) << "a Qwen3-TTS test";
        llama_cancel_tts_result r{};
        ASSERT_EQ(s.generate(&r), LLAMA_CANCEL_ERROR) << "codebook 0 took token " << c.token;
        EXPECT_EQ(r.step, LLAMA_CANCEL_TTS_STEP_GEN_CODE);
        EXPECT_NE(std::string(r.message).find(c.says), std::string::npos) << r.message;
        EXPECT_EQ(r.n_frames, k_window);
        EXPECT_EQ(r.n_samples, static_cast<int64_t>(k_window) * 1920);
        EXPECT_TRUE(same(s.pcm(), std::vector<float>(want_->begin(), want_->begin() + k_window * 1920)));
        EXPECT_EQ(fixtures::seq_state(s.lctx.get(), 0), clean_state(k_window)) << "memory is not a clean run's";
        resume_and_check(s);
    }
}

// Pocket-TTS only: a long text's chunks, and a stop inside a later chunk's prompt (the backbone
// rewound to the voice prefix: a resume point).
TEST_F(Tts, ChunkBoundaryIsAResumePoint) {
    {
        setup probe;
        ASSERT_TRUE(is_pocket(probe.mctx.get())) << "a Pocket-TTS test: tests/tts.cmake filters it out elsewhere";
    }
    llama_cancel_tts_result r{};
    // Frame by frame, to learn the call that ends the first chunk (it also prompts the second).
    int32_t first_chunk_frames = -1;
    {
        setup probe(k_long_text, 1000);
        while (first_chunk_frames < 0 && r.finished == 0) {
            ASSERT_EQ(probe.generate(&r, 1), LLAMA_CANCEL_OK) << r.message;
            if (r.n_chunks_done == 1) {
                first_chunk_frames = r.n_frames - 1;
            }
        }
    }
    ASSERT_GT(first_chunk_frames, 0) << "the long text gave one chunk";
    const int32_t frames = first_chunk_frames + 5; // a few frames of the second chunk
    setup ref(k_long_text, frames);
    ASSERT_EQ(ref.generate(&r), LLAMA_CANCEL_OK) << r.message;
    ASSERT_EQ(r.n_chunks_done, 2); // ended inside the second chunk, which counts once finished
    const std::vector<float> want = ref.pcm();

    setup s(k_long_text, frames);
    ASSERT_EQ(s.generate(&r, first_chunk_frames), LLAMA_CANCEL_OK) << r.message;
    ASSERT_EQ(r.n_chunks_done, 0);
    s.dec_trig.at = s.dec_trig.calls + 2; // the next backbone graph: the second chunk's prompt
    ASSERT_EQ(s.generate(&r, 1), LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_EQ(r.step, LLAMA_CANCEL_TTS_STEP_PROMPT);
    EXPECT_EQ(r.n_chunks_done, 1);
    EXPECT_EQ(r.n_frames, first_chunk_frames);
    EXPECT_EQ(r.n_frames_pending, 0) << "a chunk's end puts its frames into the PCM";
    s.rearm();
    ASSERT_EQ(s.generate(&r), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_frames, frames);
    EXPECT_TRUE(same(s.pcm(), want));
}

} // namespace

namespace {

const auto * const g_environment = fixtures::add_backend_environment([] {
    fixtures::backend_environment_options o;
    o.model_env       = "LLAMA_CANCEL_TTS_MODEL";
    o.model_what      = "a TTS backbone from scripts/make_tts.py";
    o.default_backend = "cpu";
    return o;
}());

} // namespace

// reach and mtmd_reach without an eval callback of ours: the backbone's byte read by the CPU's abort
// callback alone (or, off the CPU, between graphs too), the projector's graphs between steps only;
// a direct GEN_CODE call reports the same. With the hooks, inside every graph (above).
TEST_F(Tts, WithoutHooksTheResultsSayTheByteWasReadOutsideTheGraphs) {
    auto mctx = make_mtmd(nullptr, nullptr);
    auto lctx = make_lctx(nullptr);
    llama_cancel_tts_params p = llama_cancel_tts_default_params();
    p.text   = "Hello world, this is a test.";
    p.seed   = 42;
    p.window = k_window;
    llama_cancel_tts_result r{};
    tts_ptr tts(llama_cancel_tts_init(lctx.get(), mctx.get(), &p, &r));
    ASSERT_NE(tts, nullptr) << r.message;
    int8_t byte = 0;
    llama_cancel_tts_run_params rp = llama_cancel_tts_run_default_params();
    rp.byte     = &byte;
    rp.n_frames = k_window; // a GEN_WAV too
    r.reach = r.mtmd_reach = -1;
    ASSERT_EQ(llama_cancel_tts_generate(tts.get(), &rp, &r), LLAMA_CANCEL_OK) << r.message;
    ASSERT_EQ(r.n_frames, k_window);
    EXPECT_NE(r.reach, LLAMA_CANCEL_REACH_GRAPH) << "no eval callback on the backbone's context";
    EXPECT_NE(r.reach, -1);
    EXPECT_EQ(r.mtmd_reach, LLAMA_CANCEL_REACH_CALLS) << "no eval callback on the projector's context";

    gen_inputs    in;
    mtmd_gen_inp  code = in.code(mctx.get());
    mtmd_gen_out  out{};
    llama_cancel_gen_audio_params gp{&byte, nullptr};
    llama_cancel_gen_audio_result gr{};
    gr.reach = -1;
    ASSERT_EQ(llama_cancel_mtmd_gen_audio_process(mctx.get(), &code, &out, &gp, &gr), LLAMA_CANCEL_OK) << gr.message;
    EXPECT_EQ(gr.reach, LLAMA_CANCEL_REACH_CALLS);
    setup s;
    code = in.code(s.mctx.get());
    llama_cancel_gen_audio_params hooked = s.gen_audio();
    gr.reach = -1;
    ASSERT_EQ(llama_cancel_mtmd_gen_audio_process(s.mctx.get(), &code, &out, &hooked, &gr), LLAMA_CANCEL_OK)
        << gr.message;
    EXPECT_EQ(gr.reach, LLAMA_CANCEL_REACH_GRAPH);
}
