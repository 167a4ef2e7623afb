// A graph's first node as it was asked, and which graph begins there.
//
// llama.cpp and clip build a graph of one shape in the same memory, so a graph seen before begins
// at the same node, with the same op and shape. So do other graphs: a prompt's ubatches, whose
// attention reads more of the KV cache each, begin at the same node too (their first nodes do not
// see the cache). graph_ids tells those apart by their nodes' work, once each ended whole, and
// guesses at a graph's first node which of them it is: the one that came after the graph before
// last time (a call's ubatches come in order), else the one seen last with that first node.
#pragma once

#include "checkpoints/policy_constants.h"

#include "ggml.h"

#include <algorithm>
#include <cstdint>

namespace llama_cancel {

struct graph_head {
    const void * node = nullptr;
    int32_t      op   = 0;
    int64_t      ne[GGML_MAX_DIMS] = {};
    uint32_t     id   = 0; // which graph of those beginning at the node (graph_ids); 0: not known

    static graph_head of(const ggml_tensor * t) {
        return graph_head{t, t->op, {t->ne[0], t->ne[1], t->ne[2], t->ne[3]}, 0};
    }
    bool same_node(const graph_head & o) const {
        return node == o.node && op == o.op && std::equal(ne, ne + GGML_MAX_DIMS, o.ne);
    }
    bool operator==(const graph_head & o) const { return same_node(o) && id == o.id; }
};

class graph_ids {
  public:
    // A graph begins at `t`: its head, with the id of the graph guessed to begin there.
    graph_head begin(const ggml_tensor * t);
    // The graph in flight asked a node of `work` FLOPs.
    void add(double work) {
        sig_ = (sig_ ^ static_cast<uint64_t>(work)) * 1099511628211ull; // FNV-1a over the works
        nodes_++;
    }
    // The graph in flight ended. `whole`: every node of it was added, from its first to its last.
    // Returns its head: where its nodes were another graph's than the guess, that graph's id (a
    // new one for a graph not seen whole before); else the guess.
    graph_head end(bool whole);

  private:
    struct entry {
        graph_head head;
        uint64_t   sig      = 0;
        uint64_t   nodes    = 0;
        uint32_t   next     = 0; // the id of the graph that came after it last time
        uint64_t   last_use = 0; // 0: free
    };
    entry * find(uint32_t id);

    entry      entries_[tuning::k_graph_ids];
    uint32_t   ids_  = 0;
    uint64_t   uses_ = 0;
    uint32_t   last_ = 0; // the id of the graph that ended before (0: none, or not seen whole)
    graph_head head_;
    uint64_t   sig_   = 0;
    uint64_t   nodes_ = 0;
};

} // namespace llama_cancel
