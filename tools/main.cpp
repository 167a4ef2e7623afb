// llama-cancel command-line tool: dispatches to its subcommands.
#include "commands.h"

#include <cstdio>
#include <cstring>

namespace {

struct command {
    const char * name;
    int (*main)(int, char **);
};

const command k_commands[] = {
    {"bench", bench_main},
#ifdef LLAMA_CANCEL_HAVE_MTMD
    {"bench-mtmd", bench_mtmd_main},
    {"bench-tts", bench_tts_main},
    {"tts", tts_main},
#endif
    {"stress", stress_main},
    {"generate", generate_main},
    {"tune", tune_main},
    {"bench-memory", bench_memory_main},
    {"bench-seq", bench_seq_main},
    {"bench-backend", bench_backend_main},
    {"bench-plans", bench_plans_main},
};

// The commands and how to get a command's options; on stdout for --help, else on stderr after an error.
void usage(std::FILE * out) {
    std::fprintf(out,
                 "usage: llama-cancel COMMAND [OPTIONS]\n"
                 "\n"
                 "commands:\n"
                 "  bench           measure cancel latency and overhead (default: built-in synthetic model)\n"
                 "  bench-backend   one backend row of the benchmark (vulkan, rpc, blas); bench runs it\n"
                 "  bench-mtmd      one multimodal row of the benchmark (vision, audio); bench runs it\n"
#ifdef LLAMA_CANCEL_HAVE_MTMD
                 "  bench-tts       one text-to-speech row of the benchmark (qwen3tts, pockettts); bench runs it\n"
#endif
                 "  bench-plans     whether checkpoints fall on the same nodes call after call; bench runs it\n"
                 "  bench-memory    one memory-kind row of the benchmark (rollback cost); bench runs it\n"
                 "  bench-seq       per-sequence cancel inside a shared batch: the other sequences' cost\n"
                 "  generate        generate from a prompt; Ctrl-C stops the decode in flight at once\n"
#ifdef LLAMA_CANCEL_HAVE_MTMD
                 "  tts             text to speech into a WAV; Ctrl-C stops at once, keeping the audio so far\n"
#endif
                 "  tune            measure throughput and stop latency per n_ubatch for a stop-time budget\n"
                 "  stress          cancel/resume cycles at random points and cancel storms (reliability)\n"
                 "\n"
                 "run `llama-cancel COMMAND --help` for a command's options\n");
}

} // namespace

// As every command's parser does: --help on stdout with exit status 0; a command line without a
// known command gets "error: ..." and the usage on stderr, exit status 2.
int main(int argc, char ** argv) {
    if (argc >= 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc < 2) {
        std::fprintf(stderr, "error: no command\n\n");
        usage(stderr);
        return 2;
    }
    for (const command & c : k_commands) {
        if (std::strcmp(argv[1], c.name) == 0) {
            return c.main(argc - 1, argv + 1);
        }
    }
    std::fprintf(stderr, "error: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
