// How the cancel callbacks get into libmtmd, on the synthetic projectors next to the small text
// model (CPU): upstream's encode with the stateless callback, llama_cancel_mtmd_init_from_file, and
// the stateless callback stopping a clip encode. The Mtmd suite's instances are in test_mtmd.cpp.
#include "mtmd_fixtures.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

using namespace mtmd_test;

// A suite on the small text model, as the Mtmd one, without a projector kind.
class MtmdStateless : public text_model_suite<MtmdStateless> {};

// Upstream's hazard, the reason for the wrapper: with the stateless llama_cancel_eval_callback as
// mtmd's cb_eval and the byte set mid-encode, the clip graph stops and mtmd_encode_chunk still
// returns 0, its embeddings garbage.
TEST_P(Mtmd, UpstreamEncodeReportsStoppedGraphAsSuccess) {
    // The stateless callback with its byte, through common::stateless_probe, which stores the byte
    // before ask 12 is checked (another thread's store, as it were).
    common::stateless_probe probe;
    auto store_at_ask_12 = [&probe] {
        probe.rearm(12);
        probe.while_grouping = true;
    };
    auto fresh = make_mtmd(k.mmproj);
    ASSERT_EQ(mtmd_encode_chunk(fresh.get(), chunk_at(1)), 0);
    const auto ref = embeddings(fresh.get(), chunk_at(1));

    store_at_ask_12();
    auto mctx = make_mtmd(k.mmproj, common::stateless_probe::eval_cb, &probe);
    EXPECT_EQ(mtmd_encode_chunk(mctx.get(), chunk_at(1)), 0) << "upstream reports the stopped encode as success";
    EXPECT_FALSE(same(embeddings(mctx.get(), chunk_at(1)), ref)) << "with garbage embeddings";

    // The wrapper with the same stateless binding (no hook): the byte read after the encode makes
    // it a cancel, and the garbage is never decoded.
    store_at_ask_12();
    auto lctx = make_lctx();
    llama_cancel_mtmd_params p = llama_cancel_mtmd_default_params();
    p.byte    = &probe.byte;
    p.n_batch = k.n_batch;
    llama_cancel_mtmd_result r;
    EXPECT_EQ(mtmd_test::eval_chunks(mctx.get(), nullptr, lctx.get(), chunks.get(), 1, 0, &p, &r),
              LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.n_chunks_done, 1);
    EXPECT_EQ(pos_max(lctx.get()), -1);
}

TEST_P(Mtmd, InitFromFileBindsTheHook) {
    fixtures::node_trigger trig;
    int8_t   byte = 0;
    auto     hook = fixtures::make_hook(&trig);
    llama_cancel_load_result lr;
    mtmd_ptr mctx(llama_cancel_mtmd_init_from_file(k.mmproj.c_str(), fixtures::suite_model(), hook.get(), 2, false, &byte, &lr));
    ASSERT_NE(mctx, nullptr) << lr.message;
    EXPECT_EQ(lr.status, LLAMA_CANCEL_OK);

    // Encodes through it stop on the byte.
    trig.byte = &byte;
    trig.calls = 0;
    trig.at   = 10;
    auto lctx = make_lctx();
    llama_cancel_mtmd_params p = llama_cancel_mtmd_default_params();
    p.byte    = &byte;
    p.n_batch = k.n_batch;
    llama_cancel_mtmd_result r;
    ASSERT_EQ(mtmd_test::eval_chunks(mctx.get(), hook.get(), lctx.get(), chunks.get(), 0, 0, &p, &r),
              LLAMA_CANCEL_CANCELLED);
    EXPECT_EQ(r.n_chunks_done, 1);
    EXPECT_TRUE(llama_cancel_hook_stopped(hook.get()));
    byte    = 0;
    trig.at = -1;
    ASSERT_EQ(mtmd_test::eval_chunks(mctx.get(), hook.get(), lctx.get(), chunks.get(), 1, r.n_past, &p, &r),
              LLAMA_CANCEL_OK)
        << r.message;
    EXPECT_TRUE(same(common::last_logits(lctx.get()), want));
}

TEST_P(Mtmd, InitFromFileCancelsAndFailsClearly) {
    llama_cancel_load_result lr;
    int8_t byte = 1;
    EXPECT_EQ(llama_cancel_mtmd_init_from_file(k.mmproj.c_str(), fixtures::suite_model(), nullptr, 2, false, &byte, &lr), nullptr);
    EXPECT_EQ(lr.status, LLAMA_CANCEL_CANCELLED);

    // The byte stored while libmtmd loads: from its log callback, on the loading thread, at the
    // first line it logs; its progress callback then reads the byte and aborts the load.
    byte = 0;
    mtmd_helper_log_set(
        [](ggml_log_level, const char *, void * f) { __atomic_store_n(static_cast<int8_t *>(f), 1, __ATOMIC_RELAXED); },
        &byte);
    mtmd_context * m = llama_cancel_mtmd_init_from_file(k.mmproj.c_str(), fixtures::suite_model(), nullptr, 2, false, &byte, &lr);
    mtmd_helper_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    EXPECT_EQ(byte, 1) << "libmtmd logged while loading";
    EXPECT_EQ(m, nullptr);
    EXPECT_EQ(lr.status, LLAMA_CANCEL_CANCELLED) << lr.message;
    EXPECT_NE(std::string(lr.message).find("cancelled"), std::string::npos) << lr.message;
    if (m != nullptr) {
        mtmd_free(m);
    }

    EXPECT_EQ(llama_cancel_mtmd_init_from_file(nullptr, fixtures::suite_model(), nullptr, 2, false, nullptr, &lr), nullptr);
    EXPECT_NE(std::string(lr.message).find("NULL"), std::string::npos);
    EXPECT_EQ(llama_cancel_mtmd_init_from_file(k.mmproj.c_str(), nullptr, nullptr, 2, false, nullptr, &lr), nullptr);
    EXPECT_NE(std::string(lr.message).find("NULL"), std::string::npos);
    EXPECT_EQ(llama_cancel_mtmd_init_from_file("/nonexistent/mmproj.gguf", fixtures::suite_model(), nullptr, 2, false, nullptr, &lr),
              nullptr);
    EXPECT_EQ(lr.status, LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::string(lr.message).find("cannot open"), std::string::npos) << lr.message;
    const std::string text = ::testing::TempDir() + "/not-an-mmproj-" + k.name + ".gguf";
    std::ofstream(text) << "hello, I am not a projector\n";
    EXPECT_EQ(llama_cancel_mtmd_init_from_file(text.c_str(), fixtures::suite_model(), nullptr, 2, false, nullptr, &lr), nullptr);
    EXPECT_NE(std::string(lr.message).find("not a GGUF file"), std::string::npos) << lr.message;
    // A text model is not a projector: mtmd refuses it.
    const std::string model_path = fixtures::env("LLAMA_CANCEL_SMALL_MODEL");
    EXPECT_EQ(llama_cancel_mtmd_init_from_file(model_path.c_str(), fixtures::suite_model(), nullptr, 2, false, nullptr, &lr), nullptr);
    EXPECT_EQ(lr.status, LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::string(lr.message).find("could not load"), std::string::npos) << lr.message;
}

// The stateless llama_cancel_eval_callback bound as mtmd's cb_eval (through common::stateless_probe,
// which forwards every call) on a clip encode of the `small` vision projector: a byte stored while
// a node a quarter into the graph computes stops the encode at a later checkpoint, before its end;
// mtmd_encode_chunk still returns 0 (upstream's hazard, the caller's to handle without the wrapper).
TEST_F(MtmdStateless, StopsAClipEncode) {
    const std::string model_path = fixtures::env("LLAMA_CANCEL_SMALL_MODEL");
    const std::string mmproj     = fixtures::env("LLAMA_CANCEL_VISION_SMALL_MMPROJ");
    ASSERT_FALSE(model_path.empty() || mmproj.empty()) << "set LLAMA_CANCEL_SMALL_MODEL and _VISION_SMALL_MMPROJ";
    ASSERT_NE(fixtures::suite_model(), nullptr);

    common::stateless_probe probe;
    probe.measure_work = true;
    auto mctx = make_mtmd(mmproj, common::stateless_probe::eval_cb, &probe);
    ASSERT_NE(mctx, nullptr) << "mtmd cannot load " << mmproj;
    mtmd_bitmap * image = fixtures::make_media(false, 5);
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

    // The byte at 0: the encode runs whole and nothing stops.
    probe.rearm(-1);
    ASSERT_EQ(mtmd_encode_chunk(mctx.get(), chunk), 0);
    const auto ref = embeddings(mctx.get(), chunk);
    const int  n_asks = probe.asks;
    ASSERT_GT(n_asks, 8);
    EXPECT_EQ(probe.stopped_at, -1);
    std::printf("clip encode: %d nodes, largest %.3g FLOPs, %d checkpoints with the byte at 0\n", n_asks,
                probe.max_work, probe.checkpoints);

    // The byte stored while the scheduler groups the node a quarter into the encode: the callback
    // sees it at that node (no timing decides this; where a store during a node's computation is
    // seen, which depends on the measured checkpoint interval, is a figure of the benchmark).
    probe.rearm(n_asks / 4);
    probe.while_grouping = true;
    EXPECT_EQ(mtmd_encode_chunk(mctx.get(), chunk), 0) << "upstream reports the stopped encode as success";
    ASSERT_GT(probe.stored_at, 0) << "the probe never stored the byte";
    EXPECT_EQ(probe.stopped_at, probe.stored_at) << "the node asked with the byte set is a checkpoint that stops";
    EXPECT_LT(probe.stopped_at, n_asks);
    EXPECT_FALSE(same(embeddings(mctx.get(), chunk), ref)) << "the stopped encode left garbage";
    mctx.reset();
}

