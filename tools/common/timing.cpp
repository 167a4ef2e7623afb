// Timing: now_ms, format_ms and the timed writer thread (see timing.h).
#include "timing.h"

#include <chrono>
#include <cstdio>
#include <ctime>

namespace common {

double now_ms() {
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double, std::milli>(clock::now().time_since_epoch()).count();
}

namespace {

double cpu_ms(clockid_t clock) {
    timespec ts{};
    clock_gettime(clock, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

} // namespace

double thread_cpu_ms() {
    return cpu_ms(CLOCK_THREAD_CPUTIME_ID);
}

double process_cpu_ms() {
    return cpu_ms(CLOCK_PROCESS_CPUTIME_ID);
}

std::string format_ms(double ms) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.9g", ms);
    return buf;
}

double store_when(int8_t * byte, double at) {
    // Sleeping costs up to a scheduler tick of lateness; the last millisecond is spun instead.
    while (now_ms() < at - 1.0) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    while (now_ms() < at) {
    }
    const double t = now_ms();
    __atomic_store_n(byte, 1, __ATOMIC_RELAXED);
    return t;
}

std::thread store_at(int8_t * byte, double at, double * t_store) {
    return std::thread([=] { *t_store = store_when(byte, at); });
}

} // namespace common
