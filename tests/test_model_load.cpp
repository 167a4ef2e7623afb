// The cancellable model load (llama_cancel_model_load) on the tiny model (CPU): a load that
// completes, a byte preset, a cancel during the load, and files that are not models.
#include "fixtures.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

// The suite loads the tiny model as test_generate's does (logs quiet, backends loaded); the tests
// load it again themselves, from the same path.
class ModelLoad : public fixtures::model_suite<ModelLoad> {
  public:
    static constexpr const char * model_env  = "LLAMA_CANCEL_TINY_MODEL";
    static constexpr const char * model_what = "a model from scripts/make_model.py";
};

TEST_F(ModelLoad, LoadsAndReportsOk) {
    int8_t byte = 0;
    llama_cancel_load_result r;
    llama_model * m = llama_cancel_model_load(fixtures::suite_model_path().c_str(), llama_model_default_params(), &byte, &r);
    ASSERT_NE(m, nullptr) << r.message;
    EXPECT_EQ(r.status, LLAMA_CANCEL_OK);
    llama_model_free(m);
}

TEST_F(ModelLoad, BytePresetCancelsWithoutOpening) {
    int8_t byte = 1;
    llama_cancel_load_result r;
    EXPECT_EQ(llama_cancel_model_load("/nonexistent.gguf", llama_model_default_params(), &byte, &r), nullptr);
    EXPECT_EQ(r.status, LLAMA_CANCEL_CANCELLED);
}

TEST_F(ModelLoad, CancelDuringLoadReturnsNullWithReason) {
    struct first_call {
        int8_t * byte;
        int      calls = 0;
        static bool cb(float, void * d) {
            auto * f = static_cast<first_call *>(d);
            ++f->calls;
            __atomic_store_n(f->byte, 1, __ATOMIC_RELAXED); // another thread's store, as it were
            return true;
        }
    };
    int8_t byte = 0;
    first_call fc{&byte};
    llama_model_params mp = llama_model_default_params();
    mp.progress_callback           = first_call::cb;
    mp.progress_callback_user_data = &fc;
    llama_cancel_load_result r;
    EXPECT_EQ(llama_cancel_model_load(fixtures::suite_model_path().c_str(), mp, &byte, &r), nullptr);
    EXPECT_EQ(r.status, LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_NE(std::string(r.message).find("cancelled"), std::string::npos);
    EXPECT_GE(fc.calls, 1) << "the caller's progress callback is chained";
    // And the same file loads afterwards.
    byte = 0;
    llama_model * m = llama_cancel_model_load(fixtures::suite_model_path().c_str(), llama_model_default_params(), &byte, &r);
    EXPECT_NE(m, nullptr);
    llama_model_free(m);
}

// The caller's own progress callback stopping the load (issue 30): CANCELLED with that reason, not
// a corrupt model.
TEST_F(ModelLoad, CallersProgressCallbackStopIsCancelled) {
    struct refuse {
        static bool cb(float, void *) { return false; }
    };
    llama_model_params mp = llama_model_default_params();
    mp.progress_callback = refuse::cb;
    int8_t byte = 0;
    llama_cancel_load_result r;
    EXPECT_EQ(llama_cancel_model_load(fixtures::suite_model_path().c_str(), mp, &byte, &r), nullptr);
    EXPECT_EQ(r.status, LLAMA_CANCEL_CANCELLED) << r.message;
    EXPECT_NE(std::string(r.message).find("progress callback"), std::string::npos) << r.message;
}

TEST_F(ModelLoad, BadFilesAreClearErrors) {
    llama_cancel_load_result r;
    const auto mp = llama_model_default_params();
    EXPECT_EQ(llama_cancel_model_load(nullptr, mp, nullptr, &r), nullptr);
    EXPECT_NE(std::string(r.message).find("NULL"), std::string::npos);

    EXPECT_EQ(llama_cancel_model_load("/nonexistent/model.gguf", mp, nullptr, &r), nullptr);
    EXPECT_EQ(r.status, LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::string(r.message).find("cannot open"), std::string::npos) << r.message;

    const std::string dir = ::testing::TempDir();
    const std::string text = dir + "/not-a-model.gguf";
    std::ofstream(text) << "hello, I am not a model\n";
    EXPECT_EQ(llama_cancel_model_load(text.c_str(), mp, nullptr, &r), nullptr);
    EXPECT_NE(std::string(r.message).find("not a GGUF file"), std::string::npos) << r.message;

    std::ifstream in(fixtures::suite_model_path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string cut = dir + "/truncated.gguf";
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 3);
    EXPECT_EQ(llama_cancel_model_load(cut.c_str(), mp, nullptr, &r), nullptr);
    EXPECT_EQ(r.status, LLAMA_CANCEL_ERROR);
    EXPECT_NE(std::string(r.message).find("could not load"), std::string::npos) << r.message;

    std::string corrupt = bytes;
    for (size_t i = 8; i < 64 && i < corrupt.size(); ++i) {
        corrupt[i] = static_cast<char>(0xff); // tensor and metadata counts become absurd
    }
    const std::string bad = dir + "/corrupt.gguf";
    std::ofstream(bad, std::ios::binary) << corrupt;
    EXPECT_EQ(llama_cancel_model_load(bad.c_str(), mp, nullptr, &r), nullptr);
    EXPECT_EQ(r.status, LLAMA_CANCEL_ERROR) << r.message;
}
