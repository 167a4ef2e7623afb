// Where the tools find their files and programs: environment variables, the running executable's
// folder, the CLI's Python scripts, the cache of generated models, and the delay proxy binary. The
// build tree and an install tree both work; no source-tree path is compiled in. Not part of the
// library's API.
#pragma once

#include <string>

namespace common {

// The environment variable's value; empty when unset (or set to "").
std::string env_or_empty(const char * name);

// Path of the running executable; empty when it cannot be read.
std::string executable_path();

// Folder of the running executable, without the trailing slash ("." when it cannot be read).
std::string executable_dir();

// Path of one of the CLI's Python scripts (make_model.py, make_mmproj.py, plot_bench.py): from
// $LLAMA_CANCEL_SCRIPTS_DIR, else the install layout relative to the executable
// (<bindir>/LLAMA_CANCEL_SCRIPTS_REL), else the build tree's copies in scripts/ beside it.
std::string script_path(const std::string & name);

// Folder for the models the CLI generates, created if missing: $LLAMA_CANCEL_CACHE_DIR/models,
// else $XDG_CACHE_HOME/llama-cancel/models, else ~/.cache/llama-cancel/models
// (~/Library/Caches/llama-cancel/models on macOS). Ends with a slash.
std::string models_cache_dir();

// The llama-cancel-delay-proxy program ($LLAMA_CANCEL_DELAY_PROXY, else beside the running program),
// or empty, having said why on stderr.
std::string delay_proxy_binary();

} // namespace common
