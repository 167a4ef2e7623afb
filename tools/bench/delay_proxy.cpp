// llama-cancel-delay-proxy: a TCP proxy on loopback that delays each direction by a fixed time, so
// that ggml-rpc-server processes on 127.0.0.1 answer like hosts on a LAN (tests and benchmark).
//
//   llama-cancel-delay-proxy --listen PORT --to HOST:PORT --delay-ms D
//
// Listens on 127.0.0.1:PORT; each accepted connection gets its own connection to HOST:PORT. Per
// direction, a reader thread timestamps every chunk it reads and a writer thread sends it once
// D ms have passed since, in order. Standard library, POSIX sockets and threads only, and the tools'
// command-line parser (common/args, standard library only as well).
#include "common/args.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#ifdef __linux__
#    include <sys/prctl.h>
#endif

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#ifndef MSG_NOSIGNAL
#    define MSG_NOSIGNAL 0 // macOS: SIGPIPE is ignored instead (install_signals)
#endif

namespace {

using clock_type = std::chrono::steady_clock;

struct options {
    int         listen_port = 0;
    std::string host;
    std::string port;
    double      delay_ms = -1.0;
};

// What a reader read, and when. Empty data: the end of the stream.
struct chunk {
    clock_type::time_point read_at;
    std::vector<char>      data;
};

// One direction's queue from its reader to its writer.
class channel {
  public:
    // Blocks while max_queued bytes wait, so that a slow receiver holds the sender back instead of
    // the proxy buffering without bound. Drops the chunk once the direction is aborted.
    void push(chunk c) {
        std::unique_lock<std::mutex> lock(m_);
        cv_.wait(lock, [&] { return aborted_ || queued_ < max_queued || c.data.empty(); });
        if (aborted_) {
            return;
        }
        queued_ += c.data.size();
        q_.push_back(std::move(c));
        cv_.notify_all();
    }

    chunk pop() {
        std::unique_lock<std::mutex> lock(m_);
        cv_.wait(lock, [&] { return !q_.empty(); });
        chunk c = std::move(q_.front());
        q_.pop_front();
        queued_ -= c.data.size();
        cv_.notify_all();
        return c;
    }

    // The writer gave up: the reader must not wait for room any more.
    void abort() {
        std::lock_guard<std::mutex> lock(m_);
        aborted_ = true;
        cv_.notify_all();
    }

  private:
    static constexpr size_t max_queued = 16u << 20;
    std::mutex              m_;
    std::condition_variable cv_;
    std::deque<chunk>       q_;
    size_t                  queued_  = 0;
    bool                    aborted_ = false;
};

// Sleeps until shortly before `due`, then spins: a sleep wakes up tens of microseconds late, a large
// error on a 0.25 ms delay.
void wait_until(clock_type::time_point due) {
    const auto spin = std::chrono::microseconds(50);
    if (clock_type::now() < due - spin) {
        std::this_thread::sleep_until(due - spin);
    }
    while (clock_type::now() < due) {
    }
}

bool send_all(int fd, const std::vector<char> & data) {
    size_t done = 0;
    while (done < data.size()) {
        const ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return false;
        }
        done += static_cast<size_t>(n);
    }
    return true;
}

void read_side(int src, channel & ch) {
    std::vector<char> buf(64 * 1024);
    for (;;) {
        const ssize_t n = recv(src, buf.data(), buf.size(), 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        const auto now = clock_type::now();
        if (n <= 0) { // end of stream or error: either way nothing more comes from src
            ch.push({now, {}});
            return;
        }
        ch.push({now, std::vector<char>(buf.begin(), buf.begin() + n)});
    }
}

// Passes the end of the stream on as a half close, so that a peer still sending is not cut off;
// a failed send shuts both sockets down, which ends the other three threads too.
void write_side(int src, int dst, channel & ch, clock_type::duration delay) {
    for (;;) {
        chunk c = ch.pop();
        wait_until(c.read_at + delay);
        if (c.data.empty()) {
            shutdown(dst, SHUT_WR);
            return;
        }
        if (!send_all(dst, c.data)) {
            ch.abort();
            shutdown(src, SHUT_RDWR);
            shutdown(dst, SHUT_RDWR);
            return;
        }
    }
}

// An accepted connection and its connection to the target, with their four threads. The main
// thread owns the sockets and closes them only after joining the threads, so that no thread ever
// uses a descriptor number already reused for another connection.
class session {
  public:
    session(int client, int target, clock_type::duration delay) : client_(client), target_(target) {
        start([this, delay] { write_side(client_, target_, up_, delay); });
        start([this] { read_side(client_, up_); });
        start([this, delay] { write_side(target_, client_, down_, delay); });
        start([this] { read_side(target_, down_); });
    }

    ~session() {
        shutdown(client_, SHUT_RDWR);
        shutdown(target_, SHUT_RDWR);
        for (auto & t : threads_) {
            t.join();
        }
        close(client_);
        close(target_);
    }

    bool done() const { return running_ == 0; }

  private:
    template <typename F> void start(F f) {
        threads_.emplace_back([this, f] {
            f();
            --running_;
        });
    }

    int                      client_;
    int                      target_;
    channel                  up_;   // client to target
    channel                  down_; // target to client
    std::atomic<int>         running_{4};
    std::vector<std::thread> threads_;
};

int stop_pipe[2] = {-1, -1};

// SIGTERM and SIGINT wake the accept loop through a pipe; it then ends every session and returns.
void on_stop_signal(int) {
    const char c = 0;
    const ssize_t n = write(stop_pipe[1], &c, 1);
    (void) n;
}

void install_signals() {
    if (pipe(stop_pipe) != 0) {
        std::perror("llama-cancel-delay-proxy: pipe");
        std::exit(1);
    }
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sa.sa_flags   = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    std::signal(SIGPIPE, SIG_IGN); // a closed peer is a failed send, not the end of the proxy
}

const char k_synopsis[] = "usage: llama-cancel-delay-proxy --listen PORT --to HOST:PORT --delay-ms D\n"
                          "  Listens on 127.0.0.1:PORT and forwards each connection to HOST:PORT, delaying\n"
                          "  each direction by D milliseconds (D >= 0, fractional, e.g. 0.25).\n";

bool parse_port(const std::string & s, int & port) {
    char * end = nullptr;
    errno = 0;
    const long v = std::strtol(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || errno != 0 || v < 1 || v > 65535) {
        return false;
    }
    port = static_cast<int>(v);
    return true;
}

bool parse_delay(const std::string & s, double & ms) {
    char * end = nullptr;
    ms = std::strtod(s.c_str(), &end);
    return !s.empty() && *end == '\0' && std::isfinite(ms) && ms >= 0.0;
}

bool parse_target(const std::string & s, options & o) {
    const size_t colon = s.rfind(':');
    int port = 0;
    if (colon == std::string::npos || colon == 0 || !parse_port(s.substr(colon + 1), port)) {
        return false;
    }
    o.host = s.substr(0, colon);
    o.port = s.substr(colon + 1);
    return true;
}

// The command line into `o`: -1 to go on, else the exit status (the parser's --help, or 2 after
// "error: ..." and the usage on stderr).
int parse_args(int argc, char ** argv, options & o) {
    auto value = [](bool ok, const char * what) { return ok ? std::string() : std::string("is not ") + what; };
    cli_args::parser p(k_synopsis);
    p.option("--listen", [&](const char * v) { return value(parse_port(v, o.listen_port), "a port, 1-65535"); },
             "PORT", "the port to listen on, on 127.0.0.1 (required)")
        .option("--to", [&](const char * v) { return value(parse_target(v, o), "HOST:PORT"); }, "HOST:PORT",
                "where each connection is forwarded (required)")
        .option("--delay-ms", [&](const char * v) { return value(parse_delay(v, o.delay_ms), "milliseconds, >= 0"); },
                "D", "the delay each way, ms (required)");
    const int rc = p.parse(argc, argv);
    if (rc >= 0) {
        return rc;
    }
    return p.check({{o.listen_port == 0 || o.host.empty() || o.delay_ms < 0.0,
                     "--listen, --to and --delay-ms are all required"}});
}

void set_nodelay(int fd) {
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int listen_on(int port) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    sockaddr_in addr{};
    addr.sin_family      = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port        = htons(static_cast<uint16_t>(port));
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) != 0 || listen(fd, 64) != 0) {
        std::fprintf(stderr, "llama-cancel-delay-proxy: cannot listen on 127.0.0.1:%d: %s\n", port,
                     std::strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    return fd;
}

// A new connection to the target, -1 with a message when it cannot be made.
int connect_target(const options & o) {
    addrinfo hints{};
    hints.ai_family   = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo * res    = nullptr;
    const int gai     = getaddrinfo(o.host.c_str(), o.port.c_str(), &hints, &res);
    if (gai != 0) {
        std::fprintf(stderr, "llama-cancel-delay-proxy: cannot resolve %s: %s\n", o.host.c_str(), gai_strerror(gai));
        return -1;
    }
    int fd = -1, err = 0;
    for (addrinfo * ai = res; ai != nullptr && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
            err = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        std::fprintf(stderr, "llama-cancel-delay-proxy: cannot connect to %s:%s: %s\n", o.host.c_str(),
                     o.port.c_str(), std::strerror(err));
    }
    return fd;
}

// Accepts one connection and starts its session; a target that refuses closes the client.
void accept_one(int listen_fd, const options & o, clock_type::duration delay,
                std::list<std::unique_ptr<session>> & sessions) {
    const int client = accept(listen_fd, nullptr, nullptr);
    if (client < 0) {
        return; // the client gave up already, or EINTR: the loop polls again
    }
    const int target = connect_target(o);
    if (target < 0) {
        close(client);
        return;
    }
    set_nodelay(client);
    set_nodelay(target);
    sessions.push_back(std::make_unique<session>(client, target, delay));
}

// Until SIGTERM or SIGINT; finished sessions are joined as it goes.
void serve(int listen_fd, const options & o) {
    const auto delay = std::chrono::duration_cast<clock_type::duration>(
        std::chrono::duration<double, std::milli>(o.delay_ms));
    std::list<std::unique_ptr<session>> sessions;
    for (;;) {
        pollfd p[2] = {{listen_fd, POLLIN, 0}, {stop_pipe[0], POLLIN, 0}};
        if (poll(p, 2, 1000) < 0 && errno != EINTR) {
            std::perror("llama-cancel-delay-proxy: poll");
            break;
        }
        if (p[1].revents != 0) {
            break;
        }
        if (p[0].revents & POLLIN) {
            accept_one(listen_fd, o, delay, sessions);
        }
        sessions.remove_if([](const std::unique_ptr<session> & s) { return s->done(); });
    }
    sessions.clear(); // shuts every connection down and joins its threads
}

} // namespace

int main(int argc, char ** argv) {
    options o;
    const int rc = parse_args(argc, argv, o);
    if (rc >= 0) {
        return rc;
    }
#ifdef __linux__
    prctl(PR_SET_TIMERSLACK, 1UL); // 1 ns instead of 50 us of timer slack, inherited by the threads
#endif
    install_signals();
    const int listen_fd = listen_on(o.listen_port);
    if (listen_fd < 0) {
        return 1;
    }
    std::fprintf(stderr, "llama-cancel-delay-proxy: 127.0.0.1:%d -> %s:%s, %g ms each way\n", o.listen_port,
                 o.host.c_str(), o.port.c_str(), o.delay_ms);
    serve(listen_fd, o);
    close(listen_fd);
    return 0;
}
