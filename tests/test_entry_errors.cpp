// Errors the entry points report at entry, before anything is decoded or loaded: a negative
// n_predict (llama_cancel_generate, llama_cancel_generate_mtmd), and a model or projector path that
// cannot be opened or is a folder (llama_cancel_model_load, llama_cancel_mtmd_init_from_file).
#include "fixtures.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace {

class EntryErrors : public fixtures::model_suite<EntryErrors> {
  public:
    static constexpr const char * model_env  = "LLAMA_CANCEL_TINY_MODEL";
    static constexpr const char * model_what = "a model from scripts/make_model.py";
};

// A folder of its own under gtest's temporary folder.
std::string make_folder(const char * name) {
    const std::string dir = ::testing::TempDir() + "/" + name + "-" + std::to_string(getpid());
    mkdir(dir.c_str(), 0755);
    return dir;
}

} // namespace

TEST_F(EntryErrors, NegativeNPredictIsRefusedWithMemoryUntouched) {
    auto ctx = fixtures::make_bound_context(fixtures::suite_model(), nullptr, fixtures::context_options(16, 16));
    auto prompt = common::make_prompt(fixtures::suite_model(), 6);
    llama_memory_t mem = llama_get_memory(ctx.get());

    // n_predict 0: the prompt alone goes into memory, nothing is generated.
    llama_cancel_generate_params p = llama_cancel_generate_default_params();
    p.n_predict = 0;
    llama_cancel_generate_result r;
    ASSERT_EQ(llama_cancel_generate(ctx.get(), prompt.data(), 6, &p, nullptr, 0, &r), LLAMA_CANCEL_OK) << r.message;
    EXPECT_EQ(r.n_generated, 0);
    EXPECT_EQ(r.n_prompt_committed, 6);
    ASSERT_EQ(llama_memory_seq_pos_max(mem, 0), 5);

    // Negative: refused at entry, whatever the prompt and out; nothing decoded.
    llama_token out[4] = {-7, -7, -7, -7};
    for (int32_t n : {-1, -1000}) {
        p.n_predict = n;
        EXPECT_EQ(llama_cancel_generate(ctx.get(), prompt.data(), 6, &p, out, 4, &r), LLAMA_CANCEL_ERROR);
        EXPECT_EQ(r.status, LLAMA_CANCEL_ERROR);
        EXPECT_EQ(r.stop_reason, LLAMA_CANCEL_STOP_ERROR);
        EXPECT_EQ(std::string(r.message), "n_predict is " + std::to_string(n) + "; it must be 0 or more");
        EXPECT_EQ(r.n_prompt_committed, 0);
        EXPECT_EQ(r.n_generated, 0);
        EXPECT_EQ(llama_memory_seq_pos_max(mem, 0), 5) << "memory untouched";
        EXPECT_EQ(out[0], -7) << "out untouched";
    }
    // Continuing (no prompt) from the logits the prefill left: refused the same way.
    p.n_predict = -1;
    EXPECT_EQ(llama_cancel_generate(ctx.get(), nullptr, 0, &p, out, 4, &r), LLAMA_CANCEL_ERROR);
    EXPECT_EQ(std::string(r.message), "n_predict is -1; it must be 0 or more");
    EXPECT_EQ(llama_memory_seq_pos_max(mem, 0), 5);
}

TEST_F(EntryErrors, ModelLoadOfAFolder) {
    const std::string dir = make_folder("a-folder.gguf");
    llama_cancel_load_result r;
    EXPECT_EQ(llama_cancel_model_load(dir.c_str(), llama_model_default_params(), nullptr, &r), nullptr);
    EXPECT_EQ(r.status, LLAMA_CANCEL_ERROR);
    EXPECT_EQ(std::string(r.message), dir + " is a folder, not a GGUF file");
    rmdir(dir.c_str());
}

TEST_F(EntryErrors, ModelLoadOfAFileThatCannotBeOpened) {
    // Inside a folder that does not exist (mode 000 does not stop root, who runs these tests).
    const std::string path = ::testing::TempDir() + "/no-such-folder-" + std::to_string(getpid()) + "/model.gguf";
    llama_cancel_load_result r;
    EXPECT_EQ(llama_cancel_model_load(path.c_str(), llama_model_default_params(), nullptr, &r), nullptr);
    EXPECT_EQ(r.status, LLAMA_CANCEL_ERROR);
    EXPECT_EQ(std::string(r.message), "cannot open " + path + ": " + std::strerror(ENOENT));

    // A file whose mode forbids reading, where that binds (not as root).
    if (geteuid() != 0) {
        const std::string locked = ::testing::TempDir() + "/locked-" + std::to_string(getpid()) + ".gguf";
        std::ofstream(locked) << "GGUF";
        chmod(locked.c_str(), 0);
        EXPECT_EQ(llama_cancel_model_load(locked.c_str(), llama_model_default_params(), nullptr, &r), nullptr);
        EXPECT_EQ(std::string(r.message), "cannot open " + locked + ": " + std::strerror(EACCES));
        unlink(locked.c_str());
    }
}

TEST_F(EntryErrors, ModelLoadOfANonGgufFileKeepsItsMessage) {
    const std::string path = ::testing::TempDir() + "/plain-text-" + std::to_string(getpid()) + ".gguf";
    std::ofstream(path) << "hello\n";
    llama_cancel_load_result r;
    EXPECT_EQ(llama_cancel_model_load(path.c_str(), llama_model_default_params(), nullptr, &r), nullptr);
    EXPECT_EQ(r.status, LLAMA_CANCEL_ERROR);
    EXPECT_EQ(std::string(r.message), path + " is not a GGUF file (6 bytes, no GGUF magic)");
    unlink(path.c_str());
}

TEST_F(EntryErrors, MtmdInitOfAFolderOrAMissingFile) {
    const std::string dir = make_folder("an-mmproj-folder.gguf");
    const std::string missing = ::testing::TempDir() + "/no-such-folder-" + std::to_string(getpid()) + "/mmproj.gguf";
    llama_cancel_load_result r;
    EXPECT_EQ(llama_cancel_mtmd_init_from_file(dir.c_str(), fixtures::suite_model(), nullptr, 1, false, nullptr, &r), nullptr);
    EXPECT_EQ(r.status, LLAMA_CANCEL_ERROR);
    const std::string folder_msg = r.message;
    EXPECT_EQ(llama_cancel_mtmd_init_from_file(missing.c_str(), fixtures::suite_model(), nullptr, 1, false, nullptr, &r), nullptr);
    EXPECT_EQ(r.status, LLAMA_CANCEL_ERROR);
    if (llama_cancel_has_mtmd()) {
        EXPECT_EQ(folder_msg, dir + " is a folder, not a GGUF file");
        EXPECT_EQ(std::string(r.message), "cannot open " + missing + ": " + std::strerror(ENOENT));
    } else {
        EXPECT_EQ(folder_msg, "built without libmtmd");
    }
    rmdir(dir.c_str());
}
