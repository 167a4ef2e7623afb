// Backends and setups (see backends.h).
#include "backends.h"

#include "paths.h"
#include "timing.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace common {

namespace {
bool & backends_loaded() {
    static bool loaded = false;
    return loaded;
}
} // namespace

void load_backends(const backend_set & set) {
    if (!backends_loaded()) {
        ggml_backend_load_all();
        backends_loaded() = true;
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

ggml_backend_dev_t add_rpc_device(const std::string & endpoint) {
    ggml_backend_reg_t rpc = ggml_backend_reg_by_name("RPC");
    if (rpc == nullptr) {
        std::fprintf(stderr, "rpc_server: the RPC backend is not loaded\n");
        return nullptr;
    }
    // ggml-rpc is loaded at run time: its add_server function is found by name, not linked.
    using add_server_t = ggml_backend_reg_t (*)(const char *);
    auto add = reinterpret_cast<add_server_t>(ggml_backend_reg_get_proc_address(rpc, "ggml_backend_rpc_add_server"));
    ggml_backend_reg_t reg = add != nullptr ? add(endpoint.c_str()) : nullptr;
    if (reg == nullptr || ggml_backend_reg_dev_count(reg) == 0) {
        std::fprintf(stderr, "rpc_server: cannot add %s\n", endpoint.c_str());
        return nullptr;
    }
    return ggml_backend_reg_dev_get(reg, 0);
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

// Starts the servers and, for a LAN setup, a delay proxy in front of each, appending their
// endpoints to `endpoints` (the proxies' for a LAN setup) and naming them in out.description.
bool start_servers(backend_setup & out, int n, bool lan, double delay, const std::string & bin, int threads,
                   std::vector<std::string> & endpoints) {
    out.description = "ggml-rpc-server ";
    for (int i = 0; i < n; ++i) {
        out.servers.push_back(std::make_unique<rpc_server>(bin, threads));
        if (!out.servers.back()->ok()) {
            std::fprintf(stderr, "cannot start %s\n", bin.c_str());
            return false;
        }
        endpoints.push_back(out.servers.back()->endpoint());
        if (lan) {
            const std::string proxy = delay_proxy_binary();
            if (proxy.empty()) {
                return false;
            }
            out.proxies.push_back(std::make_unique<delay_proxy>(proxy, endpoints.back(), delay));
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
    return true;
}

// Starts `n` servers (and proxies) before any connection is made, so that no child inherits the
// RPC client's sockets; then registers their devices.
bool start_rpc(backend_setup & out, int n, bool lan, const std::string & bin, int threads) {
    double delay = 0.0;
    if (lan && !rpc_delay_ms(delay)) {
        return false;
    }
    std::vector<std::string> endpoints;
    if (!start_servers(out, n, lan, delay, bin, threads, endpoints)) {
        return false;
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

const char * setup_names() {
    return "cpu, blas, vulkan, vulkan-1t, rpc1, rpc2, rpc1-lan, rpc2-lan";
}

bool is_setup_name(const std::string & name) {
    for (const char * known : {"cpu", "blas", "vulkan", "vulkan-1t", "rpc1", "rpc2", "rpc1-lan", "rpc2-lan"}) {
        if (name == known) {
            return true;
        }
    }
    return false;
}

bool setup_backend(const std::string & name, const std::string & rpc_server_bin, int rpc_threads,
                   backend_setup & out) {
    out.name = name;
    const bool lan = name == "rpc1-lan" || name == "rpc2-lan";
    const std::string base = lan ? name.substr(0, name.size() - 4) : name;
    backend_set set;
    set.blas   = base == "blas";
    set.vulkan = base == "vulkan" || base == "vulkan-1t";
    set.rpc    = base == "rpc1" || base == "rpc2";
    if (!is_setup_name(name)) {
        std::fprintf(stderr, "unknown setup '%s' (%s)\n", name.c_str(), setup_names());
        return false;
    }
    if (set.vulkan) {
        setenv("GGML_VK_VISIBLE_DEVICES", "0", 0); // ggml-vulkan hides CPU-type devices otherwise
    }
    if (base == "vulkan-1t") {
        // llvmpipe reads its thread count when ggml-vulkan creates the device: before the load.
        const char * lp = std::getenv("LP_NUM_THREADS");
        if (backends_loaded() && (lp == nullptr || std::strcmp(lp, "1") != 0)) {
            std::fprintf(stderr, "vulkan-1t: the Vulkan backend was loaded before LP_NUM_THREADS=1 could be set\n");
            return false;
        }
        setenv("LP_NUM_THREADS", "1", 1);
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

} // namespace common
