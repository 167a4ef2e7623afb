// Timing for the tools and the tests: the steady clock in milliseconds, milliseconds as text, and
// the writer thread that stores the cancel byte at a chosen instant. Not part of the library's API.
#pragma once

#include <cstdint>
#include <string>
#include <thread>

namespace common {

// Steady-clock time in milliseconds (an arbitrary epoch: only differences mean anything).
double now_ms();

// CPU time, ms: of the calling thread (its waits spun included, its sleeps not), of the process.
double thread_cpu_ms();
double process_cpu_ms();

// Milliseconds as text with nine significant digits ("%.9g"): command lines, descriptions.
std::string format_ms(double ms);

// A thread that stores 1 into `byte` at absolute steady-clock time `at` (ms, see now_ms) and writes
// the store's own time to *t_store. Sleeps until 1 ms before, then spins, for a precise store.
std::thread store_at(int8_t * byte, double at, double * t_store);
// What store_at's thread does, on the calling thread: waits until `at` (now_ms clock; sleeping, then
// spinning the last millisecond), stores 1 into `byte` and returns when it did.
double store_when(int8_t * byte, double at);

} // namespace common
