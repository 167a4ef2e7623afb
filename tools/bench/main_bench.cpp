// `llama-cancel-bench`, the benchmark and test tool: the cancel benchmark, its rows (each run in a
// child process of this same executable), stress and tune. Built by default, installed only with
// LLAMA_CANCEL_INSTALL_BENCH. What users run is llama-cancel's (main.cpp).
#include "commands.h"
#include "dispatch.h"

#include <iterator>

namespace {

const dispatch::command k_commands[] = {
    {"bench", bench_main, "measure cancel latency and overhead (default: built-in synthetic model)"},
    {"bench-backend", bench_backend_main, "one backend row of the benchmark (vulkan, rpc, blas); bench runs it"},
#ifdef LLAMA_CANCEL_HAVE_MTMD
    {"bench-mtmd", bench_mtmd_main, "one multimodal row of the benchmark (vision, audio); bench runs it"},
    {"bench-tts", bench_tts_main, "one text-to-speech row of the benchmark (qwen3tts, pockettts); bench runs it"},
#endif
    {"bench-embed", bench_embed_main, "an embedding job: the byte at 0's cost and stop latency, three ways"},
    {"bench-plans", bench_plans_main, "whether checkpoints fall on the same nodes call after call; bench runs it"},
    {"bench-memory", bench_memory_main, "one memory-kind row of the benchmark (rollback cost); bench runs it"},
    {"bench-seq", bench_seq_main, "per-sequence cancel inside a shared batch: the other sequences' cost"},
    {"tune", tune_main, "measure throughput and stop latency per n_ubatch for a stop-time budget"},
    {"stress", stress_main, "cancel/resume cycles at random points and cancel storms (reliability)"},
};

// llama-cancel's commands, named in the error for one of them.
const char * const k_user_commands[] = {
    "generate", "embed", "check",
#ifdef LLAMA_CANCEL_HAVE_MTMD
    "tts",
#endif
};

} // namespace

int main(int argc, char ** argv) {
    const dispatch::program p{"llama-cancel-bench", k_commands, std::size(k_commands),
                              "llama-cancel", "generate, embed, tts and check",
                              k_user_commands, std::size(k_user_commands)};
    return dispatch::run(p, argc, argv);
}
