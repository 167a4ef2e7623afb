// Paths of the tools' files and programs (see paths.h). LLAMA_CANCEL_SCRIPTS_REL comes from
// CMakeLists.txt.
#include "paths.h"

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>
#ifdef __APPLE__
#    include <mach-o/dyld.h>
#endif

namespace common {

std::string env_or_empty(const char * name) {
    const char * v = std::getenv(name);
    return v != nullptr ? std::string(v) : std::string();
}

std::string executable_path() {
    char exe[PATH_MAX] = {0};
#ifdef __APPLE__
    uint32_t size = sizeof(exe);
    return _NSGetExecutablePath(exe, &size) == 0 ? std::string(exe) : std::string();
#else
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    return n > 0 ? std::string(exe, n) : std::string();
#endif
}

std::string executable_dir() {
    const std::string path  = executable_path();
    const size_t      slash = path.find_last_of('/');
    return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

namespace {

bool exists(const std::string & path) {
    struct stat st{};
    return stat(path.c_str(), &st) == 0;
}

// mkdir -p; true when the folder exists afterwards.
bool make_dirs(const std::string & dir) {
    for (size_t i = 1; i <= dir.size(); ++i) {
        if (i == dir.size() || dir[i] == '/') {
            const std::string part = dir.substr(0, i);
            if (!exists(part) && mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
                return false;
            }
        }
    }
    return exists(dir);
}

} // namespace

std::string script_path(const std::string & name) {
    std::vector<std::string> dirs;
    if (!env_or_empty("LLAMA_CANCEL_SCRIPTS_DIR").empty()) {
        dirs.push_back(env_or_empty("LLAMA_CANCEL_SCRIPTS_DIR"));
    }
    const std::string exe_dir = executable_dir();
    dirs.push_back(exe_dir + "/" + LLAMA_CANCEL_SCRIPTS_REL);
    dirs.push_back(exe_dir + "/scripts");
    for (const auto & dir : dirs) {
        if (exists(dir + "/" + name)) {
            return dir + "/" + name;
        }
    }
    return dirs.front() + "/" + name; // missing: the caller's error message names where it looked first
}

std::string models_cache_dir() {
    std::string base = env_or_empty("LLAMA_CANCEL_CACHE_DIR");
    if (base.empty() && !env_or_empty("XDG_CACHE_HOME").empty()) {
        base = env_or_empty("XDG_CACHE_HOME") + "/llama-cancel";
    }
    if (base.empty() && !env_or_empty("HOME").empty()) {
#ifdef __APPLE__
        base = env_or_empty("HOME") + "/Library/Caches/llama-cancel";
#else
        base = env_or_empty("HOME") + "/.cache/llama-cancel";
#endif
    }
    if (base.empty()) {
        base = "llama-cancel-cache";
    }
    const std::string dir = base + "/models";
    if (!make_dirs(dir)) {
        std::fprintf(stderr, "warning: cannot create %s\n", dir.c_str());
    }
    return dir + "/";
}

// $LLAMA_CANCEL_DELAY_PROXY (the tests, whose programs sit in another folder), else beside the
// running program (the build tree and an install with the benchmark hold both in one folder). Empty
// when neither has it: no build-tree path is compiled in.
std::string delay_proxy_binary() {
    std::string path = env_or_empty("LLAMA_CANCEL_DELAY_PROXY");
    if (path.empty()) {
        path = executable_dir() + "/llama-cancel-delay-proxy";
    }
    if (access(path.c_str(), X_OK) != 0) {
        std::fprintf(stderr, "no llama-cancel-delay-proxy at %s: the rpc*-lan setups need it (built with the "
                             "project; installed with -DLLAMA_CANCEL_INSTALL_BENCH=ON; or set LLAMA_CANCEL_DELAY_PROXY)\n",
                     path.c_str());
        return std::string();
    }
    return path;
}

} // namespace common
