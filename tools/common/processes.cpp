// Child processes: run_command, rpc_server, delay_proxy (see processes.h). Programs and proxies
// start with posix_spawn: the callers are threaded, and a forked child of a threaded process must
// not allocate before exec (another thread may hold the allocator's lock).
#include "processes.h"

#include "backends.h"
#include "timing.h"

#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char ** environ;

namespace common {

namespace {

// A port the kernel just handed out on 127.0.0.1, free again once the socket is closed; -1 if none.
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

// The NULL-terminated argv (or envp) exec wants; its pointers live as long as `args`.
std::vector<char *> argv_of(const std::vector<std::string> & args) {
    std::vector<char *> argv;
    for (const auto & a : args) {
        argv.push_back(const_cast<char *>(a.c_str()));
    }
    argv.push_back(nullptr);
    return argv;
}

// How spawn() starts a program.
struct spawn_options {
    std::string                      output;              // takes the child's stdout and stderr ("": the caller's)
    const std::vector<std::string> * env = nullptr;       // the child's whole environment (null: this process's)
    bool                             search_path = false; // look args[0] up in PATH
};

// posix_spawn with the default signal mask and dispositions: a caller's thread may block SIGTERM,
// which the child would inherit, and then only SIGKILL would stop it. -1 with a message on failure.
int spawn(const std::vector<std::string> & args, const spawn_options & how = {}) {
    std::vector<char *> argv = argv_of(args);
    const std::string & output = how.output;
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    if (!output.empty()) {
        posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_adddup2(&files, STDOUT_FILENO, STDERR_FILENO);
    }
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
    std::vector<char *> envp = how.env != nullptr ? argv_of(*how.env) : std::vector<char *>();
    char ** const       env  = how.env != nullptr ? envp.data() : environ;
    pid_t pid = -1;
    const int err = how.search_path ? posix_spawnp(&pid, argv[0], &files, &attr, argv.data(), env)
                                    : posix_spawn(&pid, argv[0], &files, &attr, argv.data(), env);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&files);
    if (err != 0) {
        std::fprintf(stderr, "cannot start %s: %s\n", argv[0], std::strerror(err));
        return -1;
    }
    return pid;
}

// Starts the program and waits for it (see run_command).
int run_to_end(const std::vector<std::string> & args, const std::vector<std::string> * env) {
    std::fflush(stdout); // the child's output comes after ours
    spawn_options how;
    how.env         = env;
    how.search_path = true;
    const int pid   = spawn(args, how);
    if (pid < 0) {
        return 127; // as a shell says when a program cannot be started
    }
    int status = 0;
    if (waitpid(pid, &status, 0) < 0) {
        return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

} // namespace

int run_command(const std::vector<std::string> & args) {
    return run_to_end(args, nullptr);
}

int run_command(const std::vector<std::string> & args, const std::vector<std::string> & env) {
    return run_to_end(args, &env);
}

rpc_server::rpc_server(const std::string & binary, int threads) {
    const int port = free_port();
    if (port <= 0) {
        std::fprintf(stderr, "rpc_server: no free port\n");
        return;
    }
    endpoint_ = "127.0.0.1:" + std::to_string(port);
    const std::string port_s = std::to_string(port), threads_s = std::to_string(threads);
    // The server logs every connection: to $LLAMA_CANCEL_RPC_LOG.PORT when set, else nowhere.
    const char * log_base = std::getenv("LLAMA_CANCEL_RPC_LOG");
    const std::string log = log_base != nullptr ? std::string(log_base) + "." + port_s : "/dev/null";
    spawn_options how;
    how.output = log;
    pid_ = spawn({binary, "-H", "127.0.0.1", "-p", port_s, "-t", threads_s, "-d", "CPU"}, how);
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

} // namespace common
