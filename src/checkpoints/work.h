// A node's estimated work in FLOP-equivalents, for placing eval-callback checkpoints.
#pragma once

#include "ggml-backend.h"
#include "ggml.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace llama_cancel {

// ggml_nelements, inline.
inline double elements(const ggml_tensor * t) {
    return static_cast<double>(t->ne[0]) * static_cast<double>(t->ne[1]) * static_cast<double>(t->ne[2]) *
           static_cast<double>(t->ne[3]);
}

// The bytes of a tensor's elements: its element count times its type's bytes an element (a block's
// share where types come in blocks), with no call into ggml per tensor (the policy prices every
// node of every graph; a call per source was a third of an ask's cost). ggml_nbytes for a tensor
// without gaps between its rows; a strided view counts the elements it reads, not its extent.
class type_sizes {
  public:
    type_sizes() {
        for (int i = 0; i < GGML_TYPE_COUNT; ++i) {
            const int64_t blck = ggml_blck_size(static_cast<ggml_type>(i));
            per_element_[i]    = blck > 0 ? static_cast<double>(ggml_type_size(static_cast<ggml_type>(i))) /
                                             static_cast<double>(blck)
                                          : 0.0;
        }
    }

    // `n`: the tensor's element count (elements(t)). Types this build does not know are asked of ggml.
    double bytes(const ggml_tensor * t, double n) const {
        const int type = static_cast<int>(t->type);
        if (type < 0 || type >= GGML_TYPE_COUNT || per_element_[type] <= 0.0) {
            return static_cast<double>(ggml_nbytes(t));
        }
        return n * per_element_[type];
    }

    double bytes(const ggml_tensor * t) const { return bytes(t, elements(t)); }

  private:
    double per_element_[GGML_TYPE_COUNT];
};

// The elements of source `i` a node of `n` written elements reads: a row lookup (GET_ROWS, a
// token's embedding) reads the rows it writes, not its whole table. (A KV cache's row write,
// SET_ROWS, is still priced as the view of the whole cache it is: docs/design.md, "How some of
// the numbers were found".)
inline double read_elements(const ggml_tensor * t, int i, double n) {
    return t->op == GGML_OP_GET_ROWS && i == 0 ? n : elements(t->src[i]);
}

// Bytes a node moves: what it writes (`n` elements) and what it reads.
inline double node_bytes(const ggml_tensor * t, double n, const type_sizes & sizes) {
    double bytes = sizes.bytes(t, n);
    for (int i = 0; i < GGML_MAX_SRC && t->src[i] != nullptr; ++i) {
        bytes += sizes.bytes(t->src[i], read_elements(t, i, n));
    }
    return bytes;
}

// The same with ggml's own sizes (tests compare the two).
inline double node_bytes(const ggml_tensor * t) {
    auto nbytes = [](const ggml_tensor * x, double n) {
        return n == elements(x) ? static_cast<double>(ggml_nbytes(x))
                                : static_cast<double>(ggml_row_size(x->type, static_cast<int64_t>(n)));
    };
    const double n     = elements(t);
    double       bytes = nbytes(t, n);
    for (int i = 0; i < GGML_MAX_SRC && t->src[i] != nullptr; ++i) {
        bytes += nbytes(t->src[i], read_elements(t, i, n));
    }
    return bytes;
}

// FLOP-equivalents a byte moved counts for. Memory-bound nodes (im2col, copies, activations, norms,
// products with a short inner dimension, an encoder's first nodes) take the time their bytes take,
// which their FLOPs price near zero: with FLOPs alone a run of them outlasted the interval twice
// over (issue 31). A CPU moves a byte in about the time of 2-5 FLOPs of a product; pricing it at 4
// keeps such runs within the interval there, and on a GPU (tens of FLOPs a byte) it is still far
// closer than 1/8. Rates are learnt in these units, so only the weighting between nodes changes.
constexpr double k_flops_per_byte = 4.0;

// The FLOPs of one node of `n` elements.
inline double node_flops(const ggml_tensor * t, double n) {
    switch (t->op) {
        case GGML_OP_MUL_MAT:
        case GGML_OP_MUL_MAT_ID:
            // every output element is a dot product over src0's rows
            return 2.0 * static_cast<double>(t->src[0]->ne[0]) * n;
        case GGML_OP_FLASH_ATTN_EXT:
            // q [D, n_q, H, B] against k [D, n_kv, ...]: two products per (query, key) pair
            return 4.0 * static_cast<double>(t->src[0]->ne[0]) * static_cast<double>(t->src[1]->ne[1]) *
                   (elements(t->src[0]) / static_cast<double>(t->src[0]->ne[0]));
        case GGML_OP_CONV_2D:
        case GGML_OP_CONV_TRANSPOSE_2D:
            return 2.0 * elements(t->src[0]) * n /
                   static_cast<double>(t->src[0]->ne[3] > 0 ? t->src[0]->ne[3] : 1);
        default:
            return n;
    }
}

// True for the ops that only describe their source's memory: ggml computes nothing for them (its
// backends skip them), so they weigh nothing, whatever the size of the tensor they look into.
inline bool describes_memory(const ggml_tensor * t) {
    switch (t->op) {
        case GGML_OP_RESHAPE:
        case GGML_OP_VIEW:
        case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE:
            return true;
        default:
            return false;
    }
}

// A node's estimated work: its FLOPs plus its bytes' worth (a node without an op, as the policy's
// tests make, is its element count; one that describes memory, nothing).
inline double node_work(const ggml_tensor * t, const type_sizes & sizes) {
    if (describes_memory(t)) {
        return 0.0;
    }
    const double n     = elements(t);
    const double flops = node_flops(t, n);
    return t->op == GGML_OP_NONE ? flops : flops + k_flops_per_byte * node_bytes(t, n, sizes);
}

inline double node_work(const ggml_tensor * t) {
    if (describes_memory(t)) {
        return 0.0;
    }
    const double flops = node_flops(t, elements(t));
    return t->op == GGML_OP_NONE ? flops : flops + k_flops_per_byte * node_bytes(t);
}

// True when `buf` is an RPC server's memory.
inline bool is_rpc_buffer(ggml_backend_buffer_t buf) {
    if (buf == nullptr || ggml_backend_buffer_is_host(buf)) {
        return false;
    }
    const char * name = ggml_backend_buffer_name(buf);
    return name != nullptr && std::strncmp(name, "RPC", 3) == 0;
}

// True when `t` lives in an RPC server's memory: reading it is a network round trip.
inline bool on_rpc_server(const ggml_tensor * t) {
    return ggml_nbytes(t) != 0 && is_rpc_buffer(t->buffer);
}

// Makes sure `t` is computed before a checkpoint reads the byte. The scheduler synchronizes the
// backend first, but the RPC backend's synchronize does not wait (its graph_compute is
// asynchronous; the server runs commands in order): reading one byte of the node does.
inline void wait_computed(const ggml_tensor * t) {
    if (on_rpc_server(t)) {
        uint8_t byte = 0;
        ggml_backend_tensor_get(t, &byte, 0, 1);
    }
}

// What a checkpoint costs by itself where that is a round trip: one more read of the computed
// node, timed with `now` (ms). -1 elsewhere (a local device's synchronize is not timed).
template <typename Clock> double round_trip_ms(const ggml_tensor * t, Clock now) {
    if (!on_rpc_server(t)) {
        return -1.0;
    }
    const double t0 = now();
    uint8_t byte = 0;
    ggml_backend_tensor_get(t, &byte, 0, 1);
    return now() - t0;
}

} // namespace llama_cancel
