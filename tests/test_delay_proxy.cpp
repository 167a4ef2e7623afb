// The loopback delay proxy (tools/bench/delay_proxy.cpp) through common::delay_proxy, in front of an echo
// server: bytes come back unchanged, no sooner than the delay each way allows, and stop() leaves no
// process behind. The delay is asserted as a lower bound only: an upper bound would be a timing
// figure of this machine's load.
#include "support.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <string>
#include <thread>

namespace {

using clock_type = std::chrono::steady_clock;

// Waits up to `ms` for `fd` to become readable.
bool readable(int fd, int ms) {
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, ms) > 0;
}

// An echo server on a free loopback port (bound to port 0), one connection at a time, in a thread.
// Its sockets are close-on-exec so that the proxy child does not inherit them.
class echo_server {
  public:
    echo_server() {
        fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family      = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len        = sizeof(addr);
        if (fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) == 0 && listen(fd_, 4) == 0 &&
            getsockname(fd_, reinterpret_cast<sockaddr *>(&addr), &len) == 0) {
            port_   = ntohs(addr.sin_port);
            thread_ = std::thread([this] { serve(); });
        }
    }

    ~echo_server() {
        stop_ = true;
        if (thread_.joinable()) {
            thread_.join();
        }
        if (fd_ >= 0) {
            close(fd_);
        }
    }

    int port() const { return port_; }

  private:
    // Polls with a timeout so that the destructor's stop byte is seen within 100 ms.
    void serve() {
        while (!stop_) {
            if (!readable(fd_, 100)) {
                continue;
            }
            const int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (c >= 0) {
                echo(c);
                close(c);
            }
        }
    }

    void echo(int c) {
        char buf[4096];
        while (!stop_) {
            if (!readable(c, 100)) {
                continue;
            }
            const ssize_t n = recv(c, buf, sizeof(buf), 0);
            if (n <= 0 || send(c, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) {
                return;
            }
        }
    }

    int               fd_   = -1;
    int               port_ = -1;
    std::atomic<bool> stop_{false};
    std::thread       thread_;
};

// A client connection to 127.0.0.1:PORT of `endpoint`, with TCP_NODELAY; -1 on failure.
int connect_to(const std::string & endpoint) {
    const int port = std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
    const int fd   = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family      = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port        = htons(static_cast<uint16_t>(port));
    const int one        = 1;
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    return fd;
}

// Reads until `n` bytes came, the peer closed, or 5 s passed.
std::string receive(int fd, size_t n) {
    std::string got;
    const auto deadline = clock_type::now() + std::chrono::seconds(5);
    char buf[4096];
    while (got.size() < n && clock_type::now() < deadline) {
        if (!readable(fd, 100)) {
            continue;
        }
        const ssize_t r = recv(fd, buf, sizeof(buf), 0);
        if (r <= 0) {
            break;
        }
        got.append(buf, static_cast<size_t>(r));
    }
    return got;
}

// Every byte value, some of them zero, so that nothing text-like is assumed.
std::string message() {
    std::string m;
    for (int i = 0; i < 1024; ++i) {
        m.push_back(static_cast<char>(i * 7 % 256));
    }
    return m;
}

} // namespace

TEST(DelayProxy, EchoIsIdenticalAndDelayedBothWays) {
    echo_server echo;
    ASSERT_GT(echo.port(), 0) << "cannot start the echo server";
    common::delay_proxy proxy(common::delay_proxy_binary(), "127.0.0.1:" + std::to_string(echo.port()), 2.0);
    ASSERT_TRUE(proxy.ok()) << "the proxy did not start or does not accept: " << common::delay_proxy_binary();
    const int fd = connect_to(proxy.endpoint());
    ASSERT_GE(fd, 0) << "cannot connect to the proxy at " << proxy.endpoint();

    // Twice: the first round trip may also wait for the echo server to finish with the proxy's
    // readiness probe (it serves one connection at a time); the second shows the proxy alone.
    const std::string sent = message();
    for (int i = 0; i < 2; ++i) {
        const auto t0 = clock_type::now();
        ASSERT_EQ(send(fd, sent.data(), sent.size(), MSG_NOSIGNAL), static_cast<ssize_t>(sent.size()));
        const std::string got = receive(fd, sent.size());
        const double      ms  = std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
        ASSERT_EQ(got.size(), sent.size()) << "the echo did not come back in full within 5 s";
        EXPECT_TRUE(got == sent) << "the echo differs from what was sent";
        EXPECT_GE(ms, 4.0) << "2 ms each way, yet the round trip took " << ms << " ms";
        std::printf("round trip %d through the proxy (2 ms each way): %.3f ms\n", i + 1, ms);
    }
    close(fd);
}

TEST(DelayProxy, StopLeavesNoProcess) {
    echo_server echo;
    ASSERT_GT(echo.port(), 0) << "cannot start the echo server";
    common::delay_proxy proxy(common::delay_proxy_binary(), "127.0.0.1:" + std::to_string(echo.port()), 2.0);
    ASSERT_TRUE(proxy.ok()) << "the proxy did not start or does not accept";
    const int pid = proxy.pid();
    ASSERT_GT(pid, 0);
    proxy.stop(); // bounded: SIGTERM, then SIGKILL after 2 s
    EXPECT_EQ(proxy.pid(), -1);
    EXPECT_FALSE(proxy.ok());
    errno = 0;
    EXPECT_EQ(kill(pid, 0), -1) << "process " << pid << " still exists after stop()";
    EXPECT_EQ(errno, ESRCH);
}
