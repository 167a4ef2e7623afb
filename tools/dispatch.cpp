// The executables' dispatcher (see dispatch.h).
#include "dispatch.h"

#include <cstdio>
#include <cstring>

namespace dispatch {

namespace {

// The commands and how to get a command's options; on stdout for --help, else on stderr after an error.
void usage(const program & p, std::FILE * out) {
    std::fprintf(out, "usage: %s COMMAND [OPTIONS]\n\ncommands:\n", p.name);
    for (size_t i = 0; i < p.n_commands; ++i) {
        std::fprintf(out, "  %-15s %s\n", p.commands[i].name, p.commands[i].help);
    }
    std::fprintf(out, "\nrun `%s COMMAND --help` for a command's options\n%s: %s\n", p.name, p.other_about, p.other);
}

} // namespace

int run(const program & p, int argc, char ** argv) {
    if (argc >= 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
        usage(p, stdout);
        return 0;
    }
    if (argc < 2) {
        std::fprintf(stderr, "error: no command\n\n");
        usage(p, stderr);
        return 2;
    }
    for (size_t i = 0; i < p.n_commands; ++i) {
        if (std::strcmp(argv[1], p.commands[i].name) == 0) {
            return p.commands[i].main(argc - 1, argv + 1);
        }
    }
    for (size_t i = 0; i < p.n_other; ++i) {
        if (std::strcmp(argv[1], p.other_commands[i]) == 0) {
            std::fprintf(stderr, "error: '%s' is a command of %s: run `%s %s ...`\n\n", argv[1], p.other, p.other,
                         argv[1]);
            usage(p, stderr);
            return 2;
        }
    }
    std::fprintf(stderr, "error: unknown command '%s'\n\n", argv[1]);
    usage(p, stderr);
    return 2;
}

} // namespace dispatch
