// `llama-cancel`, the command-line tool users run: generate, embed, tts, check. The benchmark, stress and
// tuning commands are llama-cancel-bench's (main_bench.cpp).
#include "commands.h"
#include "dispatch.h"

#include <iterator>

namespace {

const dispatch::command k_commands[] = {
    {"generate", generate_main, "generate from a prompt; Ctrl-C stops the decode in flight at once"},
    {"embed", embed_main, "a file of lines into vectors (JSON or .npy); Ctrl-C keeps every finished line's"},
#ifdef LLAMA_CANCEL_HAVE_MTMD
    {"tts", tts_main, "text to speech into a WAV; Ctrl-C stops at once, keeping the audio so far"},
#endif
    {"check", check_main, "load a model and say which stop path a cancel gets on each device"},
};

// llama-cancel-bench's commands, named in the error for one of them.
const char * const k_bench_commands[] = {
    "bench", "bench-backend", "bench-embed", "bench-memory", "bench-plans", "bench-seq", "stress", "tune",
#ifdef LLAMA_CANCEL_HAVE_MTMD
    "bench-mtmd", "bench-tts",
#endif
};

} // namespace

int main(int argc, char ** argv) {
    const dispatch::program p{"llama-cancel", k_commands, std::size(k_commands),
                              "llama-cancel-bench", "the benchmark, stress and tune",
                              k_bench_commands, std::size(k_bench_commands)};
    return dispatch::run(p, argc, argv);
}
