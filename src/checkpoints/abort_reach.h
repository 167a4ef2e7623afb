// Which nodes the abort callback already stops: decided per backend from its registry, the way
// llama.cpp hands the context's abort callback on. llama_set_abort_callback gives it to every
// backend whose registry offers "ggml_backend_set_abort_callback" (the CPU, which checks it after
// each node; ggml-metal checks one between command buffers in versions whose registry offers it);
// the others (Vulkan, CUDA, RPC...) never see it. Not from whether a buffer is host memory: Apple's
// unified-memory Metal buffers are host memory. BLAS computes into the CPU buffer type, so its nodes
// count as the CPU's: a stop waits for the BLAS split in flight and comes at the next CPU node.
#pragma once

#include "ggml-backend.h"
#include "ggml.h"

#include <utility>
#include <vector>

namespace llama_cancel {

// True when `reg` hands an abort callback to its backends.
inline bool registry_takes_abort_callback(ggml_backend_reg_t reg) {
    return reg != nullptr && ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_abort_callback") != nullptr;
}

// The answer per buffer type, remembered (a graph has a handful of them; a lookup asks the
// registry by name).
class abort_reach {
  public:
    using registry_test = bool (*)(ggml_backend_reg_t);
    // `takes`: how a registry is asked (tests pass a double); the default asks it by name.
    explicit abort_reach(registry_test takes = registry_takes_abort_callback) : takes_(takes) {}

    // True when the backend of t's buffer type stops on the abort callback. Unknown (no buffer, no
    // device): false, so a checkpoint is placed.
    bool stops_on_abort(const ggml_tensor * t) {
        if (t->buffer == nullptr) {
            return false;
        }
        const ggml_backend_buffer_type_t buft = ggml_backend_buffer_get_type(t->buffer);
        for (const auto & known : known_) {
            if (known.first == buft) {
                return known.second;
            }
        }
        const ggml_backend_dev_t dev   = device_of(buft);
        const bool               stops = dev != nullptr && takes_(ggml_backend_dev_backend_reg(dev));
        known_.emplace_back(buft, stops);
        return stops;
    }

  private:
    // The buffer type's device. ggml's CPU buffer type names none (upstream leaves it NULL): it
    // is recognised as the CPU device's default buffer type.
    static ggml_backend_dev_t device_of(ggml_backend_buffer_type_t buft) {
        ggml_backend_dev_t dev = ggml_backend_buft_get_device(buft);
        if (dev == nullptr) {
            ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
            dev = cpu != nullptr && ggml_backend_dev_buffer_type(cpu) == buft ? cpu : nullptr;
        }
        return dev;
    }

    registry_test takes_;
    std::vector<std::pair<ggml_backend_buffer_type_t, bool>> known_;
};

} // namespace llama_cancel
