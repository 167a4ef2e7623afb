// Ctrl-C for the CLI's long-running commands (generate, tts): the first SIGINT stores the byte the
// command passes to the library and notes when; a second exits at once. A tool's state, not the
// library's.
#pragma once

#include <csignal>
#include <cstdint>

namespace ctrl_c {

// Installs the handler; `second_message` is written to stderr before a second Ctrl-C exits (130).
void install(const char * second_message);
// The byte the first Ctrl-C stores.
int8_t * byte();
// True once Ctrl-C was pressed.
bool pressed();
// Milliseconds since the first Ctrl-C.
double ms_since();

} // namespace ctrl_c
