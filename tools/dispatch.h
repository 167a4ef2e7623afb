// The one dispatcher of the two executables: `llama-cancel` (what users run: generate, embed, tts, check;
// tools/cli/main.cpp) and `llama-cancel-bench` (the benchmark, stress and tuning commands;
// tools/bench/main_bench.cpp). Each passes its own command table; a command of the other executable gets
// an error that names it.
#pragma once

#include <cstddef>

namespace dispatch {

struct command {
    const char * name;
    int (*main)(int, char **); // argv[0] is the command's name
    const char * help;         // one line in the executable's usage
};

struct program {
    const char *         name; // "llama-cancel"
    const command *      commands;
    size_t               n_commands;
    const char *         other;          // the other executable, "llama-cancel-bench"
    const char *         other_about;    // what it holds, on the usage's last line
    const char * const * other_commands; // its commands' names
    size_t               n_other;
};

// --help or -h: the usage on stdout, exit status 0. No command, an unknown one or one of the other
// executable's: "error: ..." and the usage on stderr, exit status 2. Else the command's own status.
int run(const program & p, int argc, char ** argv);

} // namespace dispatch
