// Child processes the tools and the tests start: a program run to its end (the model generator,
// the plotters), ggml-rpc-server processes on loopback, and delay proxies in front of them. Servers
// are waited for until they accept connections, and stopped by PID. Not part of the library's API.
#pragma once

#include "ggml-backend.h"

#include <string>
#include <vector>

namespace common {

// Runs a program (PATH lookup) and waits; its exit code, 128 + signal, 127 when it cannot be
// started (as a shell says, with the reason on stderr), or -1 when it cannot be waited for.
int run_command(const std::vector<std::string> & args);
// The same with `env` ("NAME=value" each) as the program's whole environment.
int run_command(const std::vector<std::string> & args, const std::vector<std::string> & env);

// A ggml-rpc-server child process on 127.0.0.1 serving its CPU device (-d CPU, whatever other
// devices the environment exposes); stopped by PID.
class rpc_server {
  public:
    // Starts `binary` on a free port with `threads` threads; waits until it accepts connections.
    rpc_server(const std::string & binary, int threads);
    ~rpc_server();
    rpc_server(const rpc_server &) = delete;
    rpc_server & operator=(const rpc_server &) = delete;

    bool               ok() const { return pid_ > 0 && ready_; }
    const std::string & endpoint() const { return endpoint_; }
    // Registers the server with the RPC backend; its device, or NULL with a message on stderr.
    ggml_backend_dev_t add_device() const;
    void stop();

  private:
    int         pid_   = -1;
    bool        ready_ = false;
    std::string endpoint_;
};

// A llama-cancel-delay-proxy child process on a free port of 127.0.0.1, forwarding to `target`
// ("127.0.0.1:PORT") with each direction delayed by `delay_ms`: a loopback server that answers like
// a LAN host. Stopped by PID.
class delay_proxy {
  public:
    // Starts `binary` (posix_spawn: callers are threaded); waits until it accepts connections.
    delay_proxy(const std::string & binary, const std::string & target, double delay_ms);
    ~delay_proxy();
    delay_proxy(const delay_proxy &) = delete;
    delay_proxy & operator=(const delay_proxy &) = delete;

    bool                ok() const { return pid_ > 0 && ready_; }
    const std::string & endpoint() const { return endpoint_; }
    int                 pid() const { return pid_; } // -1 once stopped
    double              delay_ms() const { return delay_ms_; }
    void                stop();

  private:
    int         pid_      = -1;
    bool        ready_    = false;
    double      delay_ms_ = 0.0;
    std::string endpoint_;
};

} // namespace common
