#include "support.h"

#include "ggml-backend.h"
#include "work.h"

#include <algorithm>

#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __APPLE__
#    include <mach-o/dyld.h>
#endif
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>

extern char ** environ;

namespace lcs {

void load_backends(const backend_set & set) {
    static bool loaded = false;
    if (!loaded) {
        ggml_backend_load_all();
        loaded = true;
    }
    const std::pair<const char *, bool> keep[] = {{"BLAS", set.blas}, {"Vulkan", set.vulkan}, {"RPC", set.rpc}};
    for (const auto & [name, wanted] : keep) {
        ggml_backend_reg_t reg = ggml_backend_reg_by_name(name);
        if (reg != nullptr && !wanted) {
            ggml_backend_unload(reg);
        }
    }
}

void quiet_logs(bool errors_too) {
    llama_log_set(
        [](ggml_log_level l, const char * text, void * keep_errors) {
            if (keep_errors != nullptr && l == GGML_LOG_LEVEL_ERROR) {
                std::fputs(text, stderr);
            }
        },
        errors_too ? nullptr : reinterpret_cast<void *>(1));
}

hook_ptr make_hook(ggml_backend_sched_eval_callback chain, void * chain_data) {
    llama_cancel_hook_params hp = llama_cancel_hook_default_params();
    hp.chain      = chain;
    hp.chain_data = chain_data;
    return hook_ptr(llama_cancel_hook_init(&hp));
}

bool node_trigger::eval_cb(ggml_tensor *, bool ask, void * data) {
    auto * t = static_cast<node_trigger *>(data);
    if (ask) {
        return ++t->calls == t->at;
    }
    __atomic_store_n(t->flag, 1, __ATOMIC_RELAXED);
    return true;
}

bool node_trigger::abort_cb(void * data) {
    auto * t = static_cast<node_trigger *>(data);
    if (++t->calls == t->at) {
        __atomic_store_n(t->flag, 1, __ATOMIC_RELAXED);
    }
    return false;
}

namespace {

const void * buffer_type_of(const ggml_tensor * t) {
    return t->buffer != nullptr ? ggml_backend_buffer_get_type(t->buffer) : nullptr;
}

} // namespace

bool stateless_probe::eval_cb(ggml_tensor * t, bool ask, void * data) {
    auto * p = static_cast<stateless_probe *>(data);
    if (!ask) {
        const bool go = llama_cancel_eval_callback(t, false, &p->byte);
        if (go) {
            p->checkpoints++;
        } else if (p->stopped_at < 0) {
            p->stopped_at = p->asks;
        }
        return go;
    }
    p->asks++;
    p->max_work = std::max(p->max_work, llama_cancel::node_work(t));
    if (p->pending_ && buffer_type_of(t) != p->store_buft_) {
        p->store(true); // another split: the view of store_at was computed without a checkpoint
    }
    if (p->asks == p->store_at) {
        p->pending_    = true;
        p->store_buft_ = buffer_type_of(t);
        if (p->while_grouping) {
            p->store(false);
        }
    }
    const bool checkpoint = llama_cancel_eval_callback(t, true, &p->byte);
    if (checkpoint && p->pending_) {
        p->store(false);
    }
    return checkpoint;
}

void stateless_probe::store(bool late) {
    __atomic_store_n(&byte, 1, __ATOMIC_RELAXED);
    stored_at   = asks;
    stored_late = late;
    pending_    = false;
}

void stateless_probe::rearm(int at) {
    *this    = stateless_probe{};
    store_at = at;
}

model_ptr load_model(const std::string & path, int32_t n_gpu_layers) {
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers       = n_gpu_layers;
    return model_ptr(llama_model_load_from_file(path.c_str(), mp));
}

context_ptr make_context(llama_model * model, const context_options & opt) {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx           = opt.n_ctx;
    cp.n_batch         = opt.n_batch;
    cp.n_ubatch        = opt.n_ubatch;
    cp.n_seq_max       = opt.n_seq_max;
    // LLAMA_CANCEL_THREADS overrides: the ThreadSanitizer run uses 1, since ggml's CPU backend
    // synchronizes its OpenMP workers in code TSan cannot see.
    const char * threads = std::getenv("LLAMA_CANCEL_THREADS");
    cp.n_threads       = threads != nullptr ? std::atoi(threads) : opt.n_threads;
    cp.n_threads_batch = cp.n_threads;
    cp.op_offload      = false;
    cp.offload_kqv     = opt.offload_kqv;
    cp.embeddings      = opt.embeddings;
    cp.no_perf         = true;
    cp.cb_eval           = opt.cb_eval;
    cp.cb_eval_user_data = opt.cb_eval_data;
    return context_ptr(llama_init_from_model(model, cp));
}

std::vector<llama_token> make_prompt(const llama_model * model, int32_t n, uint32_t seed) {
    const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> dist(3, n_vocab - 1); // past <unk>, <s>, </s>
    std::vector<llama_token> out(n);
    for (auto & t : out) {
        t = dist(rng);
    }
    return out;
}

seq_batch::seq_batch(const std::vector<llama_token> & tokens, int32_t first, int32_t n, llama_pos start_pos,
                     llama_seq_id seq)
    : token_(tokens.begin() + first, tokens.begin() + first + n), pos_(n), n_seq_id_(n, 1), seq_(n, seq),
      seq_ptr_(n), logits_(n, 0) {
    for (int32_t i = 0; i < n; ++i) {
        pos_[i] = start_pos + i;
    }
    if (n > 0) {
        logits_[n - 1] = 1;
    }
}

llama_batch seq_batch::get() {
    for (size_t i = 0; i < seq_.size(); ++i) {
        seq_ptr_[i] = &seq_[i];
    }
    llama_batch b{};
    b.n_tokens = static_cast<int32_t>(token_.size());
    b.token    = token_.data();
    b.pos      = pos_.data();
    b.n_seq_id = n_seq_id_.data();
    b.seq_id   = seq_ptr_.data();
    b.logits   = logits_.data();
    return b;
}

std::vector<float> last_logits(llama_context * ctx) {
    const float * l = llama_get_logits_ith(ctx, -1);
    const int32_t n = llama_vocab_n_tokens(llama_model_get_vocab(llama_get_model(ctx)));
    return l != nullptr ? std::vector<float>(l, l + n) : std::vector<float>();
}

int run_command(const std::vector<std::string> & args) {
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        std::vector<char *> argv;
        for (const auto & a : args) {
            argv.push_back(const_cast<char *>(a.c_str()));
        }
        argv.push_back(nullptr);
        execvp(argv[0], argv.data());
        std::perror(argv[0]);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0) {
        return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool ensure_model(const std::string & generator, const std::string & path, const std::string & preset,
                  const std::string & arch, const std::vector<std::string> & extra) {
    struct stat st{};
    if (stat(path.c_str(), &st) == 0) {
        return true;
    }
    std::fprintf(stderr, "generating the synthetic %s '%s' model at %s ...\n", arch.c_str(), preset.c_str(),
                 path.c_str());
    std::vector<std::string> cmd = {"python3", generator, path, "--preset", preset, "--arch", arch};
    cmd.insert(cmd.end(), extra.begin(), extra.end());
    if (run_command(cmd) != 0) {
        std::fprintf(stderr, "error: %s failed to generate %s\n", generator.c_str(), path.c_str());
        return false;
    }
    return true;
}

std::string executable_dir() {
    char exe[PATH_MAX] = {0};
#ifdef __APPLE__
    uint32_t size = sizeof(exe);
    const bool ok = _NSGetExecutablePath(exe, &size) == 0;
    const std::string path = ok ? std::string(exe) : std::string();
#else
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    const std::string path = n > 0 ? std::string(exe, n) : std::string();
#endif
    const size_t slash = path.find_last_of('/');
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

std::string env_or_empty(const char * name) {
    const char * v = std::getenv(name);
    return v != nullptr ? std::string(v) : std::string();
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

double now_ms() {
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double, std::milli>(clock::now().time_since_epoch()).count();
}

model_ptr load_model_on(const std::string & path, const std::vector<ggml_backend_dev_t> & devices,
                        int32_t n_gpu_layers) {
    std::vector<ggml_backend_dev_t> list(devices);
    list.push_back(nullptr);
    llama_model_params mp = llama_model_default_params();
    mp.devices            = list.data();
    mp.n_gpu_layers       = n_gpu_layers;
    return model_ptr(llama_model_load_from_file(path.c_str(), mp));
}

namespace {

int free_port() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family      = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len        = sizeof(addr);
    int port             = -1;
    if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len) == 0) {
        port = ntohs(addr.sin_port);
    }
    if (fd >= 0) {
        close(fd);
    }
    return port;
}

bool accepts(int port) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family      = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port        = htons(static_cast<uint16_t>(port));
    const bool ok = fd >= 0 && connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) == 0;
    if (fd >= 0) {
        close(fd);
    }
    return ok;
}

// Waits (10 s at most) until the child `pid` accepts on `port`; false, and the PID reaped and set
// to -1, when it exits first.
bool wait_accepting(int & pid, int port, const char * who, const std::string & binary) {
    for (int i = 0; i < 200 && pid > 0; ++i) {
        if (accepts(port)) {
            return true;
        }
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            std::fprintf(stderr, "%s: %s exited (status %d)\n", who, binary.c_str(), status);
            pid = -1;
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (pid > 0) {
        std::fprintf(stderr, "%s: %s does not accept on port %d after 10 s\n", who, binary.c_str(), port);
    }
    return false;
}

// SIGTERM, then SIGKILL when the child has not exited after 2 s; reaped either way.
void stop_child(int & pid) {
    if (pid <= 0) {
        return;
    }
    kill(pid, SIGTERM);
    int status = 0;
    for (int i = 0; i < 100 && waitpid(pid, &status, WNOHANG) == 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (waitpid(pid, &status, WNOHANG) == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    pid = -1;
}

// Registers the RPC server at `endpoint` with the RPC backend; its device, or NULL with a message.
ggml_backend_dev_t add_rpc_device(const std::string & endpoint) {
    ggml_backend_reg_t rpc = ggml_backend_reg_by_name("RPC");
    if (rpc == nullptr) {
        std::fprintf(stderr, "rpc_server: the RPC backend is not loaded\n");
        return nullptr;
    }
    using add_server_t = ggml_backend_reg_t (*)(const char *);
    auto add = reinterpret_cast<add_server_t>(ggml_backend_reg_get_proc_address(rpc, "ggml_backend_rpc_add_server"));
    ggml_backend_reg_t reg = add != nullptr ? add(endpoint.c_str()) : nullptr;
    if (reg == nullptr || ggml_backend_reg_dev_count(reg) == 0) {
        std::fprintf(stderr, "rpc_server: cannot add %s\n", endpoint.c_str());
        return nullptr;
    }
    return ggml_backend_reg_dev_get(reg, 0);
}

// posix_spawn with the default signal mask and dispositions: a caller's thread may block SIGTERM,
// which the child would inherit, and then only SIGKILL would stop it. -1 with a message on failure.
int spawn(const std::vector<std::string> & args) {
    std::vector<char *> argv;
    for (const auto & a : args) {
        argv.push_back(const_cast<char *>(a.c_str()));
    }
    argv.push_back(nullptr);
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    for (int sig : {SIGTERM, SIGINT, SIGPIPE}) {
        sigaddset(&defaults, sig);
    }
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid = -1;
    const int err = posix_spawn(&pid, argv[0], nullptr, &attr, argv.data(), environ);
    posix_spawnattr_destroy(&attr);
    if (err != 0) {
        std::fprintf(stderr, "cannot start %s: %s\n", argv[0], std::strerror(err));
        return -1;
    }
    return pid;
}

std::string format_ms(double ms) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.9g", ms);
    return buf;
}

} // namespace

rpc_server::rpc_server(const std::string & binary, int threads) {
    const int port = free_port();
    if (port <= 0) {
        std::fprintf(stderr, "rpc_server: no free port\n");
        return;
    }
    endpoint_ = "127.0.0.1:" + std::to_string(port);
    const std::string port_s = std::to_string(port), threads_s = std::to_string(threads);
    pid_ = fork();
    if (pid_ == 0) {
        // The server logs every connection: to $LLAMA_CANCEL_RPC_LOG.PORT when set, else nowhere.
        const char * log_base = std::getenv("LLAMA_CANCEL_RPC_LOG");
        const std::string log = log_base != nullptr ? std::string(log_base) + "." + port_s : "/dev/null";
        if (std::freopen(log.c_str(), "w", stdout) == nullptr || std::freopen(log.c_str(), "a", stderr) == nullptr) {
            _exit(126);
        }
        execl(binary.c_str(), binary.c_str(), "-H", "127.0.0.1", "-p", port_s.c_str(), "-t", threads_s.c_str(), "-d",
              "CPU", (char *) nullptr);
        _exit(127);
    }
    ready_ = wait_accepting(pid_, port, "rpc_server", binary);
}

rpc_server::~rpc_server() { stop(); }

void rpc_server::stop() { stop_child(pid_); }

ggml_backend_dev_t rpc_server::add_device() const { return add_rpc_device(endpoint_); }

delay_proxy::delay_proxy(const std::string & binary, const std::string & target, double delay_ms)
    : delay_ms_(delay_ms) {
    const int port = free_port();
    if (port <= 0) {
        std::fprintf(stderr, "delay_proxy: no free port\n");
        return;
    }
    endpoint_ = "127.0.0.1:" + std::to_string(port);
    pid_      = spawn({binary, "--listen", std::to_string(port), "--to", target, "--delay-ms", format_ms(delay_ms)});
    ready_    = wait_accepting(pid_, port, "delay_proxy", binary);
}

delay_proxy::~delay_proxy() { stop(); }

void delay_proxy::stop() {
    stop_child(pid_);
    ready_ = false;
}

// Beside the running program (an install tree holds both in bin/), else where the build made it.
std::string delay_proxy_binary() {
    char exe[PATH_MAX] = {0};
    if (readlink("/proc/self/exe", exe, sizeof(exe) - 1) > 0) {
        std::string beside(exe);
        beside = beside.substr(0, beside.rfind('/') + 1) + "llama-cancel-delay-proxy";
        if (access(beside.c_str(), X_OK) == 0) {
            return beside;
        }
    }
    return LLAMA_CANCEL_DELAY_PROXY;
}

namespace {

// A LAN setup's delay each way: $LLAMA_CANCEL_RPC_DELAY_MS, 0.5 when unset. False with a message
// when it is not a number >= 0.
bool rpc_delay_ms(double & ms) {
    const std::string v = env_or_empty("LLAMA_CANCEL_RPC_DELAY_MS");
    if (v.empty()) {
        ms = 0.5;
        return true;
    }
    char * end = nullptr;
    ms         = std::strtod(v.c_str(), &end);
    if (*end != '\0' || !std::isfinite(ms) || ms < 0.0) {
        std::fprintf(stderr, "LLAMA_CANCEL_RPC_DELAY_MS='%s' is not a delay in ms (a number >= 0)\n", v.c_str());
        return false;
    }
    return true;
}

// Starts `n` servers and, for a LAN setup, a delay proxy in front of each, before any connection
// is made (no child inherits the RPC client's sockets); then registers their devices.
bool start_rpc(backend_setup & out, int n, bool lan, const std::string & bin, int threads) {
    double delay = 0.0;
    if (lan && !rpc_delay_ms(delay)) {
        return false;
    }
    std::vector<std::string> endpoints;
    out.description = "ggml-rpc-server ";
    for (int i = 0; i < n; ++i) {
        out.servers.push_back(std::make_unique<rpc_server>(bin, threads));
        if (!out.servers.back()->ok()) {
            std::fprintf(stderr, "cannot start %s\n", bin.c_str());
            return false;
        }
        endpoints.push_back(out.servers.back()->endpoint());
        if (lan) {
            out.proxies.push_back(std::make_unique<delay_proxy>(delay_proxy_binary(), endpoints.back(), delay));
            if (!out.proxies.back()->ok()) {
                std::fprintf(stderr, "cannot start a delay proxy to %s\n", endpoints.back().c_str());
                return false;
            }
            out.description += (i ? ", " : "") + endpoints.back() + " via delay proxy " + out.proxies.back()->endpoint();
            endpoints.back() = out.proxies.back()->endpoint();
        } else {
            out.description += (i ? ", " : "") + endpoints.back();
        }
    }
    if (lan) {
        out.description += " (" + format_ms(delay) + " ms each way)";
    }
    for (const auto & endpoint : endpoints) {
        ggml_backend_dev_t dev = add_rpc_device(endpoint);
        if (dev == nullptr) {
            std::fprintf(stderr, "cannot reach %s at %s\n", bin.c_str(), endpoint.c_str());
            return false;
        }
        out.devices.push_back(dev);
    }
    return true;
}

} // namespace

bool setup_backend(const std::string & name, const std::string & rpc_server_bin, int rpc_threads,
                   backend_setup & out) {
    out.name = name;
    const bool lan = name == "rpc1-lan" || name == "rpc2-lan";
    const std::string base = lan ? name.substr(0, name.size() - 4) : name;
    backend_set set;
    set.blas   = base == "blas";
    set.vulkan = base == "vulkan";
    set.rpc    = base == "rpc1" || base == "rpc2";
    if (!set.blas && !set.vulkan && !set.rpc && base != "cpu") {
        std::fprintf(stderr, "unknown setup '%s' (cpu, blas, vulkan, rpc1, rpc2, rpc1-lan, rpc2-lan)\n", name.c_str());
        return false;
    }
    if (set.vulkan) {
        setenv("GGML_VK_VISIBLE_DEVICES", "0", 0); // ggml-vulkan hides CPU-type devices otherwise
    }
    load_backends(set);
    out.description = set.blas ? "CPU + BLAS" : "CPU";
    if (set.vulkan) {
        ggml_backend_dev_t dev = ggml_backend_dev_by_name("Vulkan0");
        if (dev == nullptr) {
            std::fprintf(stderr, "no Vulkan0 device (GGML_VK_VISIBLE_DEVICES=0, mesa-vulkan-drivers)\n");
            return false;
        }
        out.devices.push_back(dev);
        out.description = ggml_backend_dev_description(dev);
    }
    if (set.rpc) {
        return start_rpc(out, base == "rpc2" ? 2 : 1, lan, rpc_server_bin, rpc_threads);
    }
    return true;
}

model_ptr backend_setup::load(const std::string & path, int32_t n_gpu_layers) const {
    return devices.empty() ? load_model(path) : load_model_on(path, devices, n_gpu_layers);
}

} // namespace lcs
