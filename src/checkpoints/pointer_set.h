// A set of pointers for the eval callback's hot path: open addressing in one array, no allocation
// once grown, cleared in constant time (entries of an older generation count as empty).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace llama_cancel {

class pointer_set {
  public:
    // True when `p` was not in the set (it is now).
    bool insert(const void * p) {
        if (2 * (size_ + 1) > slots_.size()) {
            grow();
        }
        const size_t mask = slots_.size() - 1;
        for (size_t i = hash(p) & mask;; i = (i + 1) & mask) {
            slot & s = slots_[i];
            if (s.gen != gen_) {
                s = {p, gen_};
                ++size_;
                return true;
            }
            if (s.ptr == p) {
                return false;
            }
        }
    }

    // True when `p` is in the set.
    bool contains(const void * p) const {
        if (size_ == 0) {
            return false;
        }
        const size_t mask = slots_.size() - 1;
        for (size_t i = hash(p) & mask;; i = (i + 1) & mask) {
            const slot & s = slots_[i];
            if (s.gen != gen_) {
                return false;
            }
            if (s.ptr == p) {
                return true;
            }
        }
    }

    void clear() {
        size_ = 0;
        if (++gen_ == 0) { // wrapped: no slot may look current
            for (slot & s : slots_) {
                s.gen = 0;
            }
            gen_ = 1;
        }
    }

    size_t size() const { return size_; }

  private:
    struct slot {
        const void * ptr = nullptr;
        uint32_t     gen = 0; // 0: never used
    };

    static size_t hash(const void * p) {
        const auto v = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p));
        return static_cast<size_t>((v >> 4) * 0x9E3779B97F4A7C15ull >> 16);
    }

    void grow() {
        std::vector<slot> old = std::move(slots_);
        slots_.assign(old.empty() ? 256 : 2 * old.size(), slot{});
        const uint32_t gen = gen_;
        gen_  = 1;
        size_ = 0;
        for (const slot & s : old) {
            if (s.gen == gen) {
                insert(s.ptr);
            }
        }
    }

    std::vector<slot> slots_;
    uint32_t          gen_  = 1;
    size_t            size_ = 0;
};

} // namespace llama_cancel
