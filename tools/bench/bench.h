// The `bench` command's options and the pieces its files share. The command is split by job:
// bench.cpp the command line, the run's coordinator and the JSON file; bench_cpu.cpp the CPU rows
// (measured in this process); bench_children.cpp the rows each measured in a child process
// (backends, multimodal, memory kinds, per-sequence); bench_budget.cpp the stop-time budget rows.
#pragma once

#include "common/json.h"

#include <cstdint>
#include <string>
#include <vector>

namespace bench {

// The defaults are the headline rows, a run of a few minutes: the CPU at two batch sizes, one
// GPU-API backend, one encode, one recurrent model, one per-sequence row. every() is --all: every
// row of every section, as llama-bench keeps its long sweeps behind options.
struct options {
    std::string      model;      // empty: the built-in synthetic model
    std::string      json = "llama-cancel-bench.json";
    std::vector<int> batches = {64, 512};
    std::vector<int> threads = {2};
    std::vector<std::string> backends = {"vulkan"};
    int              backend_batch = 64; // --all: 128 (llvmpipe's views are a tenth of the graph either way)
    // Multimodal rows, where the CLI was built with libmtmd.
    std::vector<std::string> mtmd = {"qwen3a"};
    // Text-to-speech rows (libmtmd too): PIPELINE or PIPELINE:BACKEND on generated bench pairs.
    std::vector<std::string> tts = {"qwen3tts"};
    // Memory-kind rows: the rollback's cost on a generated bench model of each architecture.
    std::vector<std::string> archs;
    std::string              arch_preset = "bench"; // make_model.py preset of those models
    // Stop-time budget rows, ms, on the default model and on a larger one (batch 512).
    std::vector<float>       budgets;
    // Per-sequence cancel rows (4 sequences x 128 tokens): backends, and n_ubatch of each.
    std::vector<std::string> seq_backends;
    // Plan stability rows (bench-plans): where each call's checkpoints fell, call after call.
    std::vector<std::string> plans = {"cpu"};
    // Embedding rows (bench-embed): an indexing job on a generated BERT, per setup.
    std::vector<std::string> embed;
    std::vector<int>         seq_ubatches = {128};
    int              runs = 10;
    uint32_t         seed = 42;
    bool             all  = false; // --all given

    static options every() {
        options o;
        o.batches      = {64, 256, 512};
        o.threads      = {1, 2};
        o.backends     = {"vulkan", "vulkan-1t", "rpc", "rpc2", "rpc-lan", "rpc2-lan", "blas", "cpu"};
        o.backend_batch = 128;
        o.mtmd         = {"vision", "audio", "qwen3a", "voxtral", "glma", "internvl-batch", "video", "video:vulkan"};
        o.tts          = {"qwen3tts", "pockettts", "qwen3tts-pred", "qwen3tts:vulkan", "pockettts:vulkan"};
        o.archs        = {"llama", "gemma3", "mamba", "mamba2", "rwkv7", "lfm2", "qwen35", "granitehybrid",
                          "nemotron_h", "falcon-h1", "mamba2:real", "qwen35:real"};
        o.budgets      = {5, 20, 100};
        o.seq_backends = {"cpu", "rpc1"};
        o.seq_ubatches = {512, 128};
        o.plans        = {"cpu", "vulkan"};
        o.embed        = {"cpu", "vulkan"};
        o.all          = true;
        return o;
    }
};

// The thread count of the rows beyond the CPU table that run on the CPU: backends (their host
// side), memory kinds, stop-time budgets.
constexpr int k_row_threads = 2;
// The prefill of the memory rows on real-proportion models (ARCH:real): batch and n_ubatch.
constexpr int k_real_batch  = 128;
constexpr int k_real_ubatch = 64;

// One section of the file: its rows' objects (or their error entries) and whether the rows met
// their targets (through the hook, and through the stateless callback where the rows have one).
struct section {
    std::vector<common::json> json;
    bool                      ok = true, stateless_ok = true;
    bool                      ran = false; // the options asked for rows here (else its targets are null)
};

} // namespace bench
