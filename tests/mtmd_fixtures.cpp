#include "mtmd_fixtures.h"

#include <cstdio>

#include <cstring>

namespace mtmd_test {

void silence_mtmd_logs() {
    common::quiet_logs();
    mtmd_helper_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
}

mtmd_ptr make_mtmd(const std::string & path, ggml_backend_sched_eval_callback cb, void * data) {
    mtmd_context_params mp = mtmd_context_params_default();
    mp.use_gpu           = false;
    mp.warmup            = false;
    mp.print_timings     = false;
    mp.n_threads         = 2;
    mp.cb_eval           = cb;
    mp.cb_eval_user_data = data;
    return mtmd_ptr(mtmd_init_from_file(path.c_str(), fixtures::suite_model(), mp));
}

common::context_ptr make_lctx(ggml_backend_sched_eval_callback cb, void * data) {
    return fixtures::make_bound_context(fixtures::suite_model(), nullptr,
                                        fixtures::context_options(64, 64, 1, cb, data));
}

chunks_ptr tokenize(mtmd_context * mctx, bool audio) {
    chunks_ptr chunks(mtmd_input_chunks_init());
    EXPECT_EQ(fixtures::tokenize_two_media(mctx, chunks.get(), audio), 0);
    return chunks;
}

bool same(const std::vector<float> & a, const std::vector<float> & b) {
    if (a.empty() || b.empty()) {
        ADD_FAILURE() << "an output to compare is missing (" << a.size() << " and " << b.size() << " floats)";
        return false;
    }
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<float> embeddings(mtmd_context * mctx, const mtmd_input_chunk * chunk) {
    const float * e = mtmd_get_output_embd(mctx);
    const size_t  n = static_cast<size_t>(llama_model_n_embd_inp(fixtures::suite_model())) * mtmd_input_chunk_get_n_tokens(chunk);
    return e != nullptr ? std::vector<float>(e, e + n) : std::vector<float>();
}

} // namespace mtmd_test

using namespace mtmd_test;

void Mtmd::SetUp() {
    k.name    = GetParam();
    k.audio   = k.name == "audio";
    k.mmproj  = fixtures::env(k.audio ? "LLAMA_CANCEL_AUDIO_MMPROJ" : "LLAMA_CANCEL_VISION_MMPROJ");
    k.n_batch = k.audio ? 16 : 8;
    ASSERT_FALSE(k.mmproj.empty()) << "set LLAMA_CANCEL_" << (k.audio ? "AUDIO" : "VISION") << "_MMPROJ";
    ASSERT_NE(fixtures::suite_model(), nullptr);

    // Reference: upstream's helper on plain contexts, same n_batch.
    auto mctx = make_mtmd(k.mmproj);
    ASSERT_NE(mctx, nullptr) << "mtmd cannot load " << k.mmproj;
    chunks = tokenize(mctx.get(), k.audio);
    n_chunks = static_cast<int32_t>(mtmd_input_chunks_size(chunks.get()));
    ASSERT_EQ(n_chunks, 5) << "text, media, text, media, text";
    for (int32_t i = 0; i < n_chunks; ++i) {
        ASSERT_EQ(mtmd_input_chunk_get_type(chunk_at(i)) == MTMD_INPUT_CHUNK_TYPE_TEXT, i % 2 == 0);
        start.push_back(i == 0 ? 0 : start[i - 1] + mtmd_input_chunk_get_n_pos(chunk_at(i - 1)));
    }
    ASSERT_GT(static_cast<int32_t>(mtmd_input_chunk_get_n_tokens(chunk_at(1))), k.n_batch);
    auto lctx = make_lctx();
    llama_pos new_n_past = -1;
    ASSERT_EQ(mtmd_helper_eval_chunks(mctx.get(), lctx.get(), chunks.get(), 0, 0, k.n_batch, true, &new_n_past), 0);
    want_n_past = new_n_past;
    ASSERT_EQ(want_n_past, mtmd_helper_get_n_pos(chunks.get()));
    want = common::last_logits(lctx.get());
    ASSERT_FALSE(want.empty());
}

std::vector<int> Mtmd::count_graph_ends() {
    setup c(k.mmproj);
    llama_cancel_mtmd_result r;
    EXPECT_EQ(c.eval(chunks.get(), 0, 0, k.n_batch, &r), LLAMA_CANCEL_OK) << r.message;
    return c.dec_trig.graph_ends;
}

void Mtmd::resume_and_check(setup & s, const llama_cancel_mtmd_result & r) {
    s.rearm();
    llama_cancel_mtmd_result r2;
    ASSERT_EQ(s.eval(chunks.get(), r.n_chunks_done, r.n_past, k.n_batch, &r2), LLAMA_CANCEL_OK) << r2.message;
    EXPECT_EQ(r2.n_chunks_done, n_chunks);
    EXPECT_EQ(r2.n_past, want_n_past);
    EXPECT_EQ(pos_max(s.lctx.get()), want_n_past - 1);
    EXPECT_TRUE(same(common::last_logits(s.lctx.get()), want)) << "resumed logits differ from an uninterrupted run";
}
