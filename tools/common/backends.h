// The ggml backends the tools and the tests run on: loading Debian's dynamically built backends
// (only those asked for), quieting llama.cpp's logs, registering RPC servers, loading a model on
// chosen devices, and the named setups ("cpu", "blas", "vulkan", "vulkan-1t", "rpc1", "rpc2",
// "rpc1-lan", "rpc2-lan") that bundle all of it with the server processes they need. Not part of
// the library's API.
#pragma once

#include "ggml-backend.h"
#include "models.h"
#include "processes.h"

#include <memory>
#include <string>
#include <vector>

namespace common {

// Loads Debian's dynamically built ggml backends, keeping only those asked for (the CPU backend
// always). BLAS, Vulkan and RPC would otherwise take matmuls away from the CPU backend.
struct backend_set {
    bool blas   = false;
    bool vulkan = false;
    bool rpc    = false;
};
void load_backends(const backend_set & set = {});

// Silences llama.cpp's and ggml's logs: all of them, or those below ERROR. Cancelled decodes log
// expected errors ("failed to decode, ret = 2"), which the tools and tests report themselves.
void quiet_logs(bool errors_too = true);

// Registers the RPC server at `endpoint` ("HOST:PORT") with the RPC backend; its device, or NULL
// with a message on stderr.
ggml_backend_dev_t add_rpc_device(const std::string & endpoint);

// Loads a model on explicit devices (NULL-terminated list built here), `n_gpu_layers` of them
// offloaded. NULL on failure.
model_ptr load_model_on(const std::string & path, const std::vector<ggml_backend_dev_t> & devices,
                        int32_t n_gpu_layers);

// One of the setups the tests, the benchmark and the stress command run on: "cpu", "blas" (BLAS
// beside the CPU), "vulkan" (Mesa's llvmpipe as Vulkan0, all layers), "vulkan-1t" (the same with
// llvmpipe on one thread, LP_NUM_THREADS=1: the host thread's spin-wait at each synchronize takes
// no core from the device's worker; its sleeps on fences cost instead, see docs/benchmark.md; set
// up before any backend is loaded), "rpc1" / "rpc2" (one or two ggml-rpc-server processes on
// loopback, serving their CPU), "rpc1-lan" / "rpc2-lan" (the same, each server reached through a
// delay proxy: $LLAMA_CANCEL_RPC_DELAY_MS each way, default 0.5).
// Loads exactly the ggml backends the setup needs and starts its servers, which stop with it.
struct backend_setup {
    std::string                              name;
    std::vector<std::unique_ptr<rpc_server>> servers;
    std::vector<std::unique_ptr<delay_proxy>> proxies; // declared after servers: destroyed before them
    std::vector<ggml_backend_dev_t>          devices; // empty: the CPU (and BLAS) only
    std::string                              description;

    // Loads a model on the setup's devices with `n_gpu_layers` of them offloaded (-1: all).
    model_ptr load(const std::string & path, int32_t n_gpu_layers) const;
};
// Whether setup `name` runs on Mesa's llvmpipe as a Vulkan device ("vulkan", "vulkan-1t").
inline bool is_vulkan_setup(const std::string & name) {
    return name == "vulkan" || name == "vulkan-1t";
}
// The setups' names, "cpu, blas, vulkan, vulkan-1t, rpc1, rpc2, rpc1-lan, rpc2-lan", and whether
// `name` is one: commands check their --backend with it before starting anything.
const char * setup_names();
bool        is_setup_name(const std::string & name);

// False with a message on stderr when the setup cannot be made (unknown name, no Vulkan0, a
// server that does not start). `rpc_server_bin` is ggml-rpc-server's path.
bool setup_backend(const std::string & name, const std::string & rpc_server_bin, int rpc_threads,
                   backend_setup & out);

} // namespace common
