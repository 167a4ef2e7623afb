// Fixed sets of records kept by recent use (graphs, plans, devices).
#pragma once

#include <cstddef>

namespace llama_cancel {

// Of `slots` (each with a last_use), the one `same` picks, else one `is_free` picks, else the least
// recently used: where a record goes.
template <typename Slot, size_t N, typename Same, typename Free> Slot & slot_for(Slot (&slots)[N], Same same, Free is_free) {
    Slot * slot = &slots[0];
    for (Slot & s : slots) {
        if (same(s)) {
            return s;
        }
    }
    for (Slot & s : slots) {
        if (is_free(s)) {
            return s;
        }
        slot = s.last_use < slot->last_use ? &s : slot;
    }
    return *slot;
}

} // namespace llama_cancel
