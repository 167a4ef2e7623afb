// A video's frames through llama_cancel_mtmd_eval_chunks (issue 48): the host reads the video with
// libmtmd's helper (mtmd_helper_video_*: ffprobe and ffmpeg as child programs) before anything is
// evaluated, builds the prompt from what the helper gives (its texts in place, one media marker per
// frame) and tokenizes it with mtmd_tokenize; the evaluation is then stopped inside a frame's
// encode, inside a frame's decode and between two frames, for every frame, and resumed from the
// chunk it reports: the logits are the uninterrupted run's bit for bit (CPU).
//
// The video (tests/mtmd.cmake's make_test_video, scripts/make_video.py): 64x64, 4 fps, 2 s. At
// the helper's defaults (4 fps, a timestamp text every 5 s) it reads as the text "Video:", the
// first frame, the text "[0m0.00s]" and the 7 other frames. On the tiny gemma3-style projector next
// to the small text model each frame is "<start_of_image>", an image chunk of 16 tokens and
// "<end_of_image>", so the prompt is 17 chunks: text, then frame f at chunk 2f + 1 with a text
// chunk after each.
//
// Stops are triggered deterministically, as in test_mtmd.cpp: a callback chained behind a
// llama_cancel_hook counts the nodes the scheduler asks about and stores the byte at a chosen one.
// ffprobe or ffmpeg missing, or a video the helper cannot read, fails the tests (the build root
// installs ffmpeg): nothing here is skipped.
#include "mtmd_fixtures.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <vector>

using namespace mtmd_test;

namespace {

constexpr int32_t kFrames  = 8; // 2 s at 4 fps
constexpr int32_t kNBatch  = 8; // half a frame's 16 tokens: each frame's decode takes two graphs
constexpr int     kMaxRead = 1000; // items read from one video at most (this one has 10)

const char * const kPrefix = "Here is a short clip. ";
const char * const kSuffix = "\nWhat changes from one frame to the next?";

// `name` as an executable file in one of $PATH's folders ("" when there is none).
std::string find_in_path(const char * name) {
    const char * path = std::getenv("PATH");
    std::string  dirs = path != nullptr ? path : "";
    size_t       b    = 0;
    while (b <= dirs.size()) {
        size_t e = dirs.find(':', b);
        if (e == std::string::npos) {
            e = dirs.size();
        }
        const std::string f = (e > b ? dirs.substr(b, e - b) : std::string(".")) + "/" + name;
        struct stat st {};
        if (stat(f.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) != 0) {
            return f;
        }
        b = e + 1;
    }
    return "";
}

using bitmap_ptr = mtmd::bitmap_ptr;

// One thing mtmd_helper_video_read_next gave: a frame or a text.
struct video_item {
    bitmap_ptr  frame;
    std::string text;
};

// Every item of the video at `path`, in order, with the helper's defaults; "" or what went wrong.
// The helper's ffmpeg child ends with mtmd_helper_video_free, before this returns.
std::string read_video(mtmd_context * mctx, const std::string & path, std::vector<video_item> & items) {
    items.clear();
    mtmd_helper::video_ptr video(mtmd_helper_video_init(mctx, path.c_str(), mtmd_helper_video_init_params_default()));
    if (!video) {
        return "mtmd_helper_video_init cannot read " + path + " (ffprobe and ffmpeg on PATH? a video file?)";
    }
    for (int i = 0; i < kMaxRead; ++i) {
        mtmd_bitmap * bm   = nullptr;
        char *        text = nullptr;
        const int32_t rc   = mtmd_helper_video_read_next(video.get(), &bm, &text);
        bitmap_ptr    frame(bm);
        std::unique_ptr<char, decltype(&std::free)> t(text, &std::free);
        if (rc == -1) {
            return "";
        }
        if (rc != 0) {
            return "mtmd_helper_video_read_next returned " + std::to_string(rc) + " at item " + std::to_string(i);
        }
        if ((frame != nullptr) == (t != nullptr)) {
            return "mtmd_helper_video_read_next gave " + std::string(frame ? "both a frame and a text" : "nothing") +
                   " at item " + std::to_string(i);
        }
        items.push_back(frame ? video_item{std::move(frame), ""} : video_item{nullptr, t.get()});
    }
    return "more than " + std::to_string(kMaxRead) + " items in " + path;
}

// The prompt around the video's items, as the host builds it: the helper's texts in place, a media
// marker for each frame; then mtmd_tokenize (BOS, special tokens parsed) with the frames in order.
int32_t tokenize_video(mtmd_context * mctx, const std::vector<video_item> & items, mtmd_input_chunks * chunks) {
    const std::string              marker = mtmd_default_marker();
    std::string                    prompt = kPrefix;
    std::vector<const mtmd_bitmap *> frames;
    for (const auto & it : items) {
        if (it.frame) {
            prompt += marker;
            frames.push_back(it.frame.get());
        } else {
            prompt += it.text;
        }
    }
    prompt += kSuffix;
    mtmd_input_text in{prompt.c_str(), prompt.size(), true, true};
    return mtmd_tokenize(mctx, chunks, &in, frames.data(), frames.size());
}

std::vector<llama_token> text_tokens(const mtmd_input_chunk * c) {
    size_t              n = 0;
    const llama_token * t = mtmd_input_chunk_get_tokens_text(c, &n);
    return t != nullptr ? std::vector<llama_token>(t, t + n) : std::vector<llama_token>();
}

} // namespace

// The video's prompt and its reference: upstream's helper (mtmd_helper_eval_chunks) on plain
// contexts, n_batch 8.
class MtmdVideo : public text_model_suite<MtmdVideo> {
  protected:
    void SetUp() override {
        mmproj = fixtures::env("LLAMA_CANCEL_VISION_MMPROJ");
        video  = fixtures::env("LLAMA_CANCEL_VIDEO");
        ASSERT_FALSE(mmproj.empty()) << "set LLAMA_CANCEL_VISION_MMPROJ";
        ASSERT_FALSE(video.empty()) << "set LLAMA_CANCEL_VIDEO (tests/mtmd.cmake's make_test_video writes it)";
        ASSERT_NE(fixtures::suite_model(), nullptr);
        // libmtmd's video helper runs these two; the build root installs them (ffmpeg package).
        for (const char * prog : {"ffprobe", "ffmpeg"}) {
            ASSERT_FALSE(find_in_path(prog).empty())
                << prog << " is not on PATH: libmtmd's video helper needs it (Debian package ffmpeg)";
        }

        auto mctx = make_mtmd(mmproj);
        ASSERT_NE(mctx, nullptr) << "mtmd cannot load " << mmproj;
        ASSERT_TRUE(mtmd_helper_support_video(mctx.get())) << "this libmtmd was built without MTMD_VIDEO";
        std::vector<video_item> items;
        const std::string       err = read_video(mctx.get(), video, items);
        ASSERT_EQ(err, "");
        // What libmtmd 0.7.0's helper gives for this file at its defaults.
        std::string seen;
        for (const auto & it : items) {
            seen += it.frame ? std::string(" [frame]") : " \"" + it.text + "\"";
        }
        SCOPED_TRACE("the helper gave:" + seen);
        ASSERT_EQ(items.size(), static_cast<size_t>(kFrames + 2));
        EXPECT_EQ(items[0].text, "Video:");
        EXPECT_EQ(items[2].text, "[0m0.00s]") << "the first timestamp comes after the first frame";
        for (size_t i = 1; i < items.size(); ++i) {
            if (i == 2) {
                continue;
            }
            const mtmd_bitmap * bm = items[i].frame.get();
            ASSERT_NE(bm, nullptr) << "item " << i << " is a frame";
            EXPECT_EQ(mtmd_bitmap_get_nx(bm), 64u);
            EXPECT_EQ(mtmd_bitmap_get_ny(bm), 64u);
        }

        chunks.reset(mtmd_input_chunks_init());
        ASSERT_EQ(tokenize_video(mctx.get(), items, chunks.get()), 0);
        n_chunks = static_cast<int32_t>(mtmd_input_chunks_size(chunks.get()));
        ASSERT_EQ(n_chunks, 2 * kFrames + 1) << "text, then each frame and the text after it";
        for (int32_t i = 0; i < n_chunks; ++i) {
            const auto type = mtmd_input_chunk_get_type(chunk_at(i));
            ASSERT_EQ(type, i % 2 == 1 ? MTMD_INPUT_CHUNK_TYPE_IMAGE : MTMD_INPUT_CHUNK_TYPE_TEXT) << "chunk " << i;
            start.push_back(i == 0 ? 0 : start[i - 1] + mtmd_input_chunk_get_n_pos(chunk_at(i - 1)));
        }
        ASSERT_GT(static_cast<int32_t>(mtmd_input_chunk_get_n_tokens(chunk_at(1))), kNBatch)
            << "a frame's decode takes several graphs";

        auto      lctx       = make_lctx();
        llama_pos new_n_past = -1;
        ASSERT_EQ(mtmd_helper_eval_chunks(mctx.get(), lctx.get(), chunks.get(), 0, 0, kNBatch, true, &new_n_past), 0);
        want_n_past = new_n_past;
        ASSERT_EQ(want_n_past, mtmd_helper_get_n_pos(chunks.get()));
        want = common::last_logits(lctx.get());
        ASSERT_FALSE(want.empty());
    }

    const mtmd_input_chunk * chunk_at(int32_t i) const { return mtmd_input_chunks_get(chunks.get(), i); }
    static int32_t frame_chunk(int32_t f) { return 2 * f + 1; }

    // Decode graphs (one per n_batch slice) of chunks [0, i).
    int graphs_before(int32_t i) const {
        int g = 0;
        for (int32_t c = 0; c < i; ++c) {
            g += (static_cast<int>(mtmd_input_chunk_get_n_tokens(chunk_at(c))) + kNBatch - 1) / kNBatch;
        }
        return g;
    }

    // The encode asks and decode graph ends of an uninterrupted run on a setup.
    void count_run(int & per_encode, std::vector<int> & graph_ends) {
        setup                    c(mmproj);
        llama_cancel_mtmd_result r;
        ASSERT_EQ(c.eval(chunks.get(), 0, 0, kNBatch, &r), LLAMA_CANCEL_OK) << r.message;
        ASSERT_EQ(c.enc_trig.calls % kFrames, 0) << "every frame's encode asks as often";
        per_encode = c.enc_trig.calls / kFrames;
        ASSERT_GT(per_encode, 10);
        graph_ends = c.dec_trig.graph_ends;
        ASSERT_EQ(static_cast<int>(graph_ends.size()), graphs_before(n_chunks));
    }

    // A CANCELLED result that left exactly chunks [0, done) in memory.
    void expect_stopped_at(const llama_cancel_mtmd_result & r, llama_context * lctx, int32_t done) {
        EXPECT_EQ(r.status, LLAMA_CANCEL_CANCELLED);
        EXPECT_EQ(r.n_chunks_done, done);
        EXPECT_EQ(r.n_past, start[done]);
        EXPECT_EQ(pos_max(lctx), start[done] - 1) << "positions of exactly the chunks before " << done;
        EXPECT_EQ(llama_memory_seq_pos_min(llama_get_memory(lctx), 0), 0);
        EXPECT_STREQ(r.message, "");
    }

    // Resumes `s` from where `r` left and checks the final logits against the reference.
    void resume_and_check(setup & s, const llama_cancel_mtmd_result & r) {
        s.rearm();
        llama_cancel_mtmd_result r2;
        ASSERT_EQ(s.eval(chunks.get(), r.n_chunks_done, r.n_past, kNBatch, &r2), LLAMA_CANCEL_OK) << r2.message;
        EXPECT_EQ(r2.n_chunks_done, n_chunks);
        EXPECT_EQ(r2.n_past, want_n_past);
        EXPECT_EQ(pos_max(s.lctx.get()), want_n_past - 1);
        EXPECT_TRUE(same(common::last_logits(s.lctx.get()), want)) << "resumed logits differ from an uninterrupted run";
    }

    std::string            mmproj, video;
    chunks_ptr             chunks;
    int32_t                n_chunks = 0;
    std::vector<llama_pos> start; // first position of each chunk
    llama_pos              want_n_past = 0;
    std::vector<float>     want;
};

// The byte at 0: OK, every chunk in memory, the logits of upstream's helper bit for bit, and each
// frame encoded once through the hook bound to the mtmd context.
TEST_F(MtmdVideo, ByteAtZeroMatchesUpstreamHelper) {
    setup                    s(mmproj);
    llama_cancel_mtmd_result r;
    ASSERT_EQ(s.eval(chunks.get(), 0, 0, kNBatch, &r), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.status, LLAMA_CANCEL_OK);
    EXPECT_EQ(r.n_chunks_done, n_chunks);
    EXPECT_EQ(r.n_past, want_n_past);
    EXPECT_EQ(pos_max(s.lctx.get()), want_n_past - 1);
    EXPECT_TRUE(same(common::last_logits(s.lctx.get()), want)) << "logits differ from mtmd_helper_eval_chunks";
    EXPECT_GT(s.enc_trig.calls, 0) << "the frames' encodes ran through the hook bound to the mtmd context";
    EXPECT_EQ(static_cast<int>(s.dec_trig.graph_ends.size()), graphs_before(n_chunks));
}

// The prompt as upstream's own video path makes it: mtmd_helper_bitmap_init_from_file on the video
// gives a lazy bitmap under one marker, which mtmd_tokenize expands into the helper's texts and
// frames. The same chunk layout, the same frames (their embeddings bit for bit) and the same text
// chunks between them; the first differs by where the text is cut before tokenizing.
TEST_F(MtmdVideo, FramesAsUpstreamsVideoPathHasThem) {
    auto                       mctx = make_mtmd(mmproj);
    mtmd_helper_bitmap_wrapper w    = mtmd_helper_bitmap_init_from_file(mctx.get(), video.c_str(), false,
                                                                        mtmd_helper_init_opt_default());
    ASSERT_NE(w.bitmap, nullptr);
    ASSERT_NE(w.video_ctx, nullptr) << "the helper took the file for a video";
    mtmd_helper::video_ptr video_ctx(w.video_ctx);
    bitmap_ptr             lazy(w.bitmap);
    const std::string      prompt    = std::string(kPrefix) + mtmd_default_marker() + kSuffix;
    mtmd_input_text        in{prompt.c_str(), prompt.size(), true, true};
    const mtmd_bitmap *    bitmaps[] = {lazy.get()};
    chunks_ptr             up(mtmd_input_chunks_init());
    ASSERT_EQ(mtmd_tokenize(mctx.get(), up.get(), &in, bitmaps, 1), 0);
    ASSERT_EQ(static_cast<int32_t>(mtmd_input_chunks_size(up.get())), n_chunks);
    for (int32_t i = 0; i < n_chunks; ++i) {
        const mtmd_input_chunk * a = chunk_at(i);
        const mtmd_input_chunk * b = mtmd_input_chunks_get(up.get(), i);
        ASSERT_EQ(mtmd_input_chunk_get_type(a), mtmd_input_chunk_get_type(b)) << "chunk " << i;
        if (i % 2 == 1) {
            EXPECT_EQ(mtmd_input_chunk_get_n_tokens(a), mtmd_input_chunk_get_n_tokens(b)) << "chunk " << i;
            ASSERT_EQ(mtmd_encode_chunk(mctx.get(), a), 0);
            const auto ea = embeddings(mctx.get(), a);
            ASSERT_EQ(mtmd_encode_chunk(mctx.get(), b), 0);
            EXPECT_TRUE(same(ea, embeddings(mctx.get(), b))) << "frame " << i / 2 << " differs";
        } else if (i > 0) {
            EXPECT_EQ(text_tokens(a), text_tokens(b)) << "chunk " << i << ": the texts between frames";
        }
    }
    // The first text chunk: the prompt's text before the video and the helper's "Video:" are one
    // piece of text here, two there (the lazy bitmap's texts are tokenized one at a time), so the
    // SentencePiece tokenizer puts its space prefix before "Video:" there too.
    const llama_vocab * vocab = llama_model_get_vocab(fixtures::suite_model());
    auto tok = [&](const std::string & text) {
        std::vector<llama_token> t(text.size() + 8);
        const int n = llama_tokenize(vocab, text.c_str(), static_cast<int32_t>(text.size()), t.data(),
                                     static_cast<int32_t>(t.size()), false, true);
        t.resize(static_cast<size_t>(std::max(n, 0)));
        return t;
    };
    auto cat = [](std::vector<llama_token> a, const std::vector<llama_token> & b) {
        a.insert(a.end(), b.begin(), b.end());
        return a;
    };
    const std::vector<llama_token> bos{llama_vocab_bos(vocab)};
    EXPECT_EQ(text_tokens(chunk_at(0)), cat(cat(bos, tok(std::string(kPrefix) + "Video:")), tok("<start_of_image>")));
    EXPECT_EQ(text_tokens(mtmd_input_chunks_get(up.get(), 0)),
              cat(cat(cat(bos, tok(kPrefix)), tok("Video:")), tok("<start_of_image>")));
}

// A stop inside each frame's encode: nothing of that frame in memory, everything before it kept;
// the resume encodes it again and ends on the uninterrupted run's logits.
TEST_F(MtmdVideo, StopInsideEachFramesEncodeResumes) {
    int              per_encode = 0;
    std::vector<int> ends;
    ASSERT_NO_FATAL_FAILURE(count_run(per_encode, ends));
    for (int32_t f = 0; f < kFrames; ++f) {
        SCOPED_TRACE("frame " + std::to_string(f));
        setup s(mmproj);
        s.enc_trig.at = f * per_encode + per_encode / 2; // the middle of frame f's encode
        llama_cancel_mtmd_result r;
        ASSERT_EQ(s.eval(chunks.get(), 0, 0, kNBatch, &r), LLAMA_CANCEL_CANCELLED) << r.message;
        expect_stopped_at(r, s.lctx.get(), frame_chunk(f));
        EXPECT_TRUE(llama_cancel_hook_stopped(s.enc_hook.get())) << "the hook stopped the clip graph";
        EXPECT_EQ(s.enc_trig.calls, s.enc_trig.at) << "no node of the encode after the stop";
        EXPECT_EQ(static_cast<int>(s.dec_trig.graph_ends.size()), graphs_before(frame_chunk(f)))
            << "the stopped frame's embeddings were not decoded";
        resume_and_check(s, r);
    }
}

// A stop inside each frame's decode (its second n_batch slice): the frame's first slice is rolled
// back too.
TEST_F(MtmdVideo, StopInsideEachFramesDecodeResumes) {
    int              per_encode = 0;
    std::vector<int> ends;
    ASSERT_NO_FATAL_FAILURE(count_run(per_encode, ends));
    for (int32_t f = 0; f < kFrames; ++f) {
        SCOPED_TRACE("frame " + std::to_string(f));
        const int g     = graphs_before(frame_chunk(f)) + 1;
        ASSERT_LT(g, graphs_before(frame_chunk(f) + 1));
        setup s(mmproj);
        s.dec_trig.at = ends[g - 1] + (ends[g] - ends[g - 1]) / 2;
        llama_cancel_mtmd_result r;
        ASSERT_EQ(s.eval(chunks.get(), 0, 0, kNBatch, &r), LLAMA_CANCEL_CANCELLED) << r.message;
        expect_stopped_at(r, s.lctx.get(), frame_chunk(f));
        EXPECT_TRUE(llama_cancel_hook_stopped(s.dec_hook.get()));
        EXPECT_EQ(static_cast<int>(s.dec_trig.graph_ends.size()), g) << "stopped in graph " << g;
        resume_and_check(s, r);
    }
}

// A stop between frames: a plain trigger as the text context's cb_eval (no hook there, so the
// graph is not stopped) stores the byte at the last node of frame f's last decode graph; that
// frame completes and the byte is seen before the next chunk starts.
TEST_F(MtmdVideo, StopBetweenFramesResumes) {
    fixtures::node_trigger count;
    {
        auto                     mctx = make_mtmd(mmproj);
        auto                     lctx = make_lctx(fixtures::node_trigger::eval_cb, &count);
        llama_cancel_mtmd_params p    = llama_cancel_mtmd_default_params();
        p.n_batch                     = kNBatch;
        llama_cancel_mtmd_result r;
        ASSERT_EQ(eval_chunks(mctx.get(), nullptr, lctx.get(), chunks.get(), 0, 0, &p, &r), LLAMA_CANCEL_OK)
            << r.message;
        ASSERT_EQ(static_cast<int>(count.graph_ends.size()), graphs_before(n_chunks));
    }
    for (int32_t f = 0; f < kFrames; ++f) {
        SCOPED_TRACE("after frame " + std::to_string(f));
        const int32_t done = frame_chunk(f) + 1;
        const int     g    = graphs_before(done) - 1; // frame f's last decode graph

        int8_t                 byte = 0;
        fixtures::node_trigger trig;
        trig.byte = &byte;
        trig.at   = count.graph_ends[g];
        fixtures::node_trigger enc;
        auto                   enc_hook = fixtures::make_hook(&enc);
        auto                   mctx     = make_mtmd(mmproj, llama_cancel_hook_eval_callback, enc_hook.get());
        auto                   lctx     = make_lctx(fixtures::node_trigger::eval_cb, &trig);
        llama_cancel_mtmd_params p      = llama_cancel_mtmd_default_params();
        p.byte                          = &byte;
        p.n_batch                       = kNBatch;
        llama_cancel_mtmd_result r;
        ASSERT_EQ(eval_chunks(mctx.get(), enc_hook.get(), lctx.get(), chunks.get(), 0, 0, &p, &r),
                  LLAMA_CANCEL_CANCELLED)
            << r.message;
        expect_stopped_at(r, lctx.get(), done);
        EXPECT_EQ(trig.calls, count.graph_ends[g]) << "no decode after the stop";
        EXPECT_FALSE(llama_cancel_hook_stopped(enc_hook.get())) << "no encode was stopped";

        byte    = 0;
        trig.at = -1;
        llama_cancel_mtmd_result r2;
        ASSERT_EQ(eval_chunks(mctx.get(), enc_hook.get(), lctx.get(), chunks.get(), r.n_chunks_done, r.n_past, &p, &r2),
                  LLAMA_CANCEL_OK)
            << r2.message;
        EXPECT_EQ(r2.n_chunks_done, n_chunks);
        EXPECT_EQ(r2.n_past, want_n_past);
        EXPECT_TRUE(same(common::last_logits(lctx.get()), want)) << "resumed logits differ from an uninterrupted run";
    }
}

// Two stops in one prompt (inside frame 2's encode, then inside frame 6's decode), then the rest:
// the logits of the uninterrupted run.
TEST_F(MtmdVideo, StopTwiceThenResume) {
    int              per_encode = 0;
    std::vector<int> ends;
    ASSERT_NO_FATAL_FAILURE(count_run(per_encode, ends));
    setup s(mmproj);
    s.enc_trig.at = 2 * per_encode + 3;
    llama_cancel_mtmd_result r;
    ASSERT_EQ(s.eval(chunks.get(), 0, 0, kNBatch, &r), LLAMA_CANCEL_CANCELLED) << r.message;
    expect_stopped_at(r, s.lctx.get(), frame_chunk(2));

    s.rearm();
    // The resumed call starts at frame 2's chunk: its decode asks count from there.
    const int base = ends[graphs_before(frame_chunk(2)) - 1];
    const int g    = graphs_before(frame_chunk(6)); // frame 6's first slice
    s.dec_trig.at  = ends[g] - base - 3;
    ASSERT_EQ(s.eval(chunks.get(), r.n_chunks_done, r.n_past, kNBatch, &r), LLAMA_CANCEL_CANCELLED) << r.message;
    expect_stopped_at(r, s.lctx.get(), frame_chunk(6));
    resume_and_check(s, r);
}

// Bad input is an ERROR with its reason, memory untouched and nothing encoded: a first_chunk past
// the prompt's end or negative, an n_batch over the context's; a file that is no video is refused by
// the helper before any evaluation.
TEST_F(MtmdVideo, ClearErrors) {
    setup                    s(mmproj);
    llama_cancel_mtmd_params p = s.params(kNBatch);
    llama_cancel_mtmd_result r;
    auto err = [&](int32_t first, const std::string & what) {
        EXPECT_EQ(eval_chunks(s.mctx.get(), s.enc_hook.get(), s.lctx.get(), chunks.get(), first, 0, &p, &r),
                  LLAMA_CANCEL_ERROR);
        EXPECT_EQ(r.status, LLAMA_CANCEL_ERROR);
        EXPECT_NE(std::string(r.message).find(what), std::string::npos) << r.message;
    };
    const std::string range = "is outside [0, " + std::to_string(n_chunks) + "]";
    err(n_chunks + 1, "first_chunk " + std::to_string(n_chunks + 1) + " " + range);
    err(-1, "first_chunk -1 " + range);
    p.n_batch = 65;
    err(0, "n_batch 65");
    p.n_batch = kNBatch;
    EXPECT_EQ(pos_max(s.lctx.get()), -1) << "memory untouched";
    EXPECT_EQ(s.enc_trig.calls + s.dec_trig.calls, 0) << "nothing encoded or decoded";

    // first_chunk == the number of chunks: the whole video is in, nothing to do.
    EXPECT_EQ(eval_chunks(s.mctx.get(), s.enc_hook.get(), s.lctx.get(), chunks.get(), n_chunks, want_n_past, &p, &r),
              LLAMA_CANCEL_OK);
    EXPECT_EQ(r.n_chunks_done, n_chunks);
    EXPECT_EQ(r.n_past, want_n_past);

    std::vector<video_item> items;
    EXPECT_NE(read_video(s.mctx.get(), mmproj, items), "") << "a GGUF file read as a video";
    EXPECT_TRUE(items.empty());
    EXPECT_NE(read_video(s.mctx.get(), video + ".missing", items), "");
}
