#include "cli/ctrl_c.h"

#include <cstring>
#include <ctime>
#include <unistd.h>

namespace {

int8_t                g_byte    = 0;
volatile sig_atomic_t g_signals = 0;
timespec              g_signal_time{};
const char *          g_second_message = "";

void on_sigint(int) {
    if (g_signals++ > 0) {
        (void) !write(STDERR_FILENO, g_second_message, std::strlen(g_second_message));
        _exit(130);
    }
    clock_gettime(CLOCK_MONOTONIC, &g_signal_time); // async-signal-safe
    __atomic_store_n(&g_byte, 1, __ATOMIC_RELAXED);  // lock-free: async-signal-safe
}

} // namespace

namespace ctrl_c {

void install(const char * second_message) {
    g_second_message = second_message;
    struct sigaction sa{};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
}

int8_t * byte() {
    return &g_byte;
}

bool pressed() {
    return g_signals > 0;
}

double ms_since() {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - g_signal_time.tv_sec) * 1e3 + (now.tv_nsec - g_signal_time.tv_nsec) / 1e6;
}

} // namespace ctrl_c
