// The multimodal tests' helpers (test_mtmd.cpp, test_mtmd_binding.cpp): synthetic media and
// prompts, mtmd and text contexts bound as hosts bind them, and the Mtmd suite, whose every test
// starts from a reference run of upstream's helper on plain contexts.
#pragma once

#include "fixtures.h"
#include "mtmd_calls.h"
#include "mtmd_media.h"

#include "mtmd-helper.h"
#include "mtmd.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mtmd_test {

// Quiet llama.cpp's and libmtmd's logs.
void silence_mtmd_logs();

// A model suite on the small text model (LLAMA_CANCEL_SMALL_MODEL), libmtmd's logs silenced too.
template <typename Suite, typename Base = ::testing::Test> class text_model_suite : public fixtures::model_suite<Suite, Base> {
  public:
    static constexpr const char * model_env  = "LLAMA_CANCEL_SMALL_MODEL";
    static constexpr const char * model_what = "the tests' small model";
    static void SetUpTestSuite() {
        silence_mtmd_logs();
        fixtures::model_suite<Suite, Base>::SetUpTestSuite();
    }
};

using common::hook_ptr;

using mtmd_ptr   = mtmd::context_ptr;
using chunks_ptr = mtmd::input_chunks_ptr;

// The host's side of binding: cb_eval and its user data in mtmd_context_params. Warmup off (speed).
mtmd_ptr make_mtmd(const std::string & path, ggml_backend_sched_eval_callback cb = nullptr, void * data = nullptr);

// Text context; n_batch = n_ubatch = 64, so that each decode slice (n_batch of the call) is one ubatch.
common::context_ptr make_lctx(ggml_backend_sched_eval_callback cb = nullptr, void * data = nullptr);

chunks_ptr tokenize(mtmd_context * mctx, bool audio);

using fixtures::pos_max;


// a and b hold the same floats bit for bit. An empty vector (an output or embedding that was not
// there) is a failure of the calling test, never "the same" nor "different".
bool same(const std::vector<float> & a, const std::vector<float> & b);

std::vector<float> embeddings(mtmd_context * mctx, const mtmd_input_chunk * chunk);

// Everything one run needs: an mtmd context with its encode hook, a text context with its decode
// hook, each hook chaining a trigger.
struct setup {
    fixtures::node_trigger enc_trig, dec_trig;
    int8_t            byte = 0;
    hook_ptr          enc_hook;
    hook_ptr          dec_hook;
    mtmd_ptr          mctx;
    common::context_ptr  lctx;

    setup(const std::string & mmproj) {
        enc_trig.byte = &byte;
        dec_trig.byte = &byte;
        enc_hook      = fixtures::make_hook(&enc_trig);
        dec_hook      = fixtures::make_hook(&dec_trig);
        mctx          = make_mtmd(mmproj, llama_cancel_hook_eval_callback, enc_hook.get());
        llama_context_params cp = llama_context_default_params();
        llama_cancel_hook_bind(dec_hook.get(), &cp);
        lctx = make_lctx(cp.cb_eval, cp.cb_eval_user_data);
    }

    llama_cancel_mtmd_params params(int32_t n_batch) {
        llama_cancel_mtmd_params p = llama_cancel_mtmd_default_params();
        p.byte        = &byte;
        p.hook        = dec_hook.get();
        p.n_batch     = n_batch;
        return p;
    }

    int32_t eval(const mtmd_input_chunks * chunks, int32_t first, llama_pos n_past, int32_t n_batch,
                 llama_cancel_mtmd_result * r) {
        const llama_cancel_mtmd_params p = params(n_batch);
        return eval_chunks(mctx.get(), enc_hook.get(), lctx.get(), chunks, first, n_past, &p, r);
    }

    // Clears the byte and the triggers, as a host does before resuming.
    void rearm() {
        byte = 0;
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

} // namespace mtmd_test

// The prompts' reference on the small text model (LLAMA_CANCEL_SMALL_MODEL, the model suite's),
// per projector kind (the parameter: vision or audio).
class Mtmd : public mtmd_test::text_model_suite<Mtmd, ::testing::TestWithParam<std::string>> {
  protected:
    void SetUp() override;

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
    std::vector<int> count_graph_ends();

    // Resumes from where `r` left and checks the final logits against the reference.
    void resume_and_check(mtmd_test::setup & s, const llama_cancel_mtmd_result & r);

    mtmd_test::kind_info              k;
    mtmd_test::chunks_ptr             chunks;
    int32_t                n_chunks = 0;
    std::vector<llama_pos> start; // first position of each chunk
    llama_pos              want_n_past = 0;
    std::vector<float>     want;
};
