#include "checkpoints/graph_head.h"

#include "checkpoints/slots.h"

namespace llama_cancel {

graph_ids::entry * graph_ids::find(uint32_t id) {
    for (entry & e : entries_) {
        if (id != 0 && e.last_use != 0 && e.head.id == id) {
            return &e;
        }
    }
    return nullptr;
}

graph_head graph_ids::begin(const ggml_tensor * t) {
    head_  = graph_head::of(t);
    sig_   = 14695981039346656037ull;
    nodes_ = 0;
    const entry * before = find(last_);
    const entry * next   = before != nullptr ? find(before->next) : nullptr;
    if (next != nullptr && next->head.same_node(head_)) {
        head_.id = next->head.id;
        return head_;
    }
    const entry * seen = nullptr;
    for (const entry & e : entries_) {
        if (e.last_use != 0 && e.head.same_node(head_) && (seen == nullptr || e.last_use > seen->last_use)) {
            seen = &e;
        }
    }
    head_.id = seen != nullptr ? seen->head.id : 0;
    return head_;
}

graph_head graph_ids::end(bool whole) {
    if (!whole || nodes_ == 0) {
        last_ = head_.id; // a graph stopped or run uncut goes on as the one guessed
        return head_;
    }
    auto    same = [&](const entry & s) { return s.last_use != 0 && s.head.same_node(head_) && s.sig == sig_ && s.nodes == nodes_; };
    entry & e    = slot_for(entries_, same, [](const entry & s) { return s.last_use == 0; });
    if (!same(e)) {
        e = entry{head_, sig_, nodes_, 0, 0}; // a graph not seen whole before, or one forgotten
        if (++ids_ == 0) {
            ++ids_; // 0 stays "not known"
        }
        e.head.id = ids_;
    }
    e.last_use = ++uses_;
    if (entry * before = find(last_)) {
        before->next = e.head.id;
    }
    last_ = e.head.id;
    return e.head;
}

} // namespace llama_cancel
