// The stateless callback's policies for graphs outside the library's calls, one per compute buffer.
// There no call says whose graph runs, and one policy per thread learnt one rate and one graph size
// from a projector's graphs and a text context's on one device (upstream's mtmd helper with the
// stateless name bound to both contexts: stops 0.6 s after the store in an audio encode on
// llvmpipe, the hook's 42 ms). Each context's scheduler (llama.cpp's, clip's) allocates its graphs'
// nodes in compute buffers of its own, so the buffer tells the graphs apart, as a hook per context
// does (a context has one per device its graphs run on: llama.cpp's a host one for the token
// lookup and a device one, so eight slots cover a text and a projector context). A node elsewhere
// (a view of the KV cache, a weight) stays with the policy of the node before it; the least
// recently used slot is forgotten for a ninth buffer.
#pragma once

#include "ggml-backend.h"
#include "ggml.h"

#include <cstddef>
#include <cstdint>

namespace llama_cancel {

template <typename Policy, size_t Slots = 8> class buffer_policies {
  public:
    // The policy of `node`'s graph.
    Policy & of(const ggml_tensor * node) {
        const ggml_backend_buffer_t buf = node->buffer;
        if (buf != nullptr && buf != slots_[current_].key && buf != other_ && !select(buf)) {
            other_ = buf; // not a compute buffer: remembered, so that the next ask skips the query
        }
        return slots_[current_].policy;
    }

  private:
    struct slot {
        const void * key      = nullptr;
        uint64_t     last_use = 0;
        Policy       policy;
    };

    // Makes the compute buffer `buf`'s policy current (the least recently used one forgotten for a
    // new buffer); false when `buf` holds no graph's nodes.
    bool select(ggml_backend_buffer_t buf) {
        if (ggml_backend_buffer_get_usage(buf) != GGML_BACKEND_BUFFER_USAGE_COMPUTE) {
            return false;
        }
        size_t oldest = 0;
        for (size_t i = 0; i < Slots; ++i) {
            if (slots_[i].key == buf) {
                oldest = i;
                break;
            }
            if (slots_[i].last_use < slots_[oldest].last_use) {
                oldest = i;
            }
        }
        if (slots_[oldest].key != buf) {
            slots_[oldest].policy = Policy();
            slots_[oldest].key    = buf;
        }
        slots_[oldest].last_use = ++uses_;
        current_ = oldest;
        other_   = nullptr;
        return true;
    }

    slot         slots_[Slots];
    size_t       current_ = 0;
    uint64_t     uses_    = 0;
    const void * other_   = nullptr; // the last buffer found not to be a compute buffer
};

} // namespace llama_cancel
