// llama-cancel command-line tool: dispatches to its subcommands.
#include "commands.h"

#include <cstdio>
#include <cstring>

static void usage() {
    std::fprintf(stderr,
                 "usage: llama-cancel COMMAND [OPTIONS]\n"
                 "\n"
                 "commands:\n"
                 "  bench           measure cancel latency and overhead (default: built-in synthetic model)\n"
                 "  bench-backend   one backend row of the benchmark (vulkan, rpc, blas); bench runs it\n"
                 "  bench-mtmd      one multimodal row of the benchmark (vision, audio); bench runs it\n"
                 "  bench-memory    one memory-kind row of the benchmark (rollback cost); bench runs it\n"
                 "  bench-seq       per-sequence cancel inside a shared batch: the other sequences' cost\n"
                 "  generate        generate from a prompt; Ctrl-C stops the decode in flight at once\n"
                 "  tune            measure throughput and stop latency per n_ubatch for a stop-time budget\n"
                 "  stress          cancel/resume cycles at random points and cancel storms (reliability)\n"
                 "\n"
                 "run `llama-cancel COMMAND --help` for a command's options\n");
}

int main(int argc, char ** argv) {
    if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
        usage();
        return argc < 2 ? 2 : 0;
    }
    if (std::strcmp(argv[1], "bench") == 0) {
        return bench_main(argc - 1, argv + 1);
    }
#ifdef LLAMA_CANCEL_HAVE_MTMD
    if (std::strcmp(argv[1], "bench-mtmd") == 0) {
        return bench_mtmd_main(argc - 1, argv + 1);
    }
#endif
    if (std::strcmp(argv[1], "stress") == 0) {
        return stress_main(argc - 1, argv + 1);
    }
    if (std::strcmp(argv[1], "generate") == 0) {
        return generate_main(argc - 1, argv + 1);
    }
    if (std::strcmp(argv[1], "tune") == 0) {
        return tune_main(argc - 1, argv + 1);
    }
    if (std::strcmp(argv[1], "bench-memory") == 0) {
        return bench_memory_main(argc - 1, argv + 1);
    }
    if (std::strcmp(argv[1], "bench-seq") == 0) {
        return bench_seq_main(argc - 1, argv + 1);
    }
    if (std::strcmp(argv[1], "bench-backend") == 0) {
        return bench_backend_main(argc - 1, argv + 1);
    }
    std::fprintf(stderr, "llama-cancel: unknown command '%s'\n\n", argv[1]);
    usage();
    return 2;
}
