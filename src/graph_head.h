// A graph's first node as it was asked: llama.cpp and clip build a graph of one shape in the same
// memory, so a graph seen before begins at the same node, with the same op and shape.
#pragma once

#include "ggml.h"

#include <algorithm>
#include <cstdint>

namespace llama_cancel {

struct graph_head {
    const void * node = nullptr;
    int32_t      op   = 0;
    int64_t      ne[GGML_MAX_DIMS] = {};

    static graph_head of(const ggml_tensor * t) {
        return graph_head{t, t->op, {t->ne[0], t->ne[1], t->ne[2], t->ne[3]}};
    }
    bool operator==(const graph_head & o) const {
        return node == o.node && op == o.op && std::equal(ne, ne + GGML_MAX_DIMS, o.ne);
    }
};

} // namespace llama_cancel
