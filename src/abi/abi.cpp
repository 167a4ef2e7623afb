// The version and the struct layouts this library was compiled with, for FFI hosts that copy the
// layouts by hand (Dart ffigen, ctypes, koffi) and check them at load: llama-cancel.h's structs,
// llama.h's that the bindings copy, and mtmd.h's when built with libmtmd.
#include "llama-cancel.h"
#ifdef LLAMA_CANCEL_WITH_MTMD
#    include "mtmd.h"
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace {

struct field_entry {
    const char * name;
    size_t       offset;
};

struct struct_entry {
    const char *        name;
    size_t              size;
    const field_entry * fields; // NULL-name terminated
};

#define LC_FIELD(S, F) { #F, offsetof(S, F) }
#define LC_END         { nullptr, 0 }

// The field tables (llama_cancel_*'s with their no-padding checks, llama.h's and mtmd.h's) and the
// lists LC_HEADER_STRUCTS, LC_LLAMA_STRUCTS and LC_MTMD_STRUCTS are generated from the headers by
// scripts/gen_layouts.py (as are the Python and Node bindings' layouts): after changing a struct of
// the header run `python3 scripts/gen_layouts.py`; the CTest test layouts_generated fails while any
// copy differs from the headers.
#if UINTPTR_MAX == UINT64_MAX
template <typename... F> constexpr size_t sum_of(F... sizes) {
    return (sizes + ... + size_t{0});
}
#    define LC_NO_HOLES(S, ...) static_assert(sizeof(S) == sum_of(__VA_ARGS__), #S " has padding")
#    define LC_SZ(S, F)         sizeof(S::F)
#endif
#define LC_STRUCT(S, FIELDS) { #S, sizeof(S), FIELDS }

#include "abi/abi_layouts.inc"

// Every public struct of llama-cancel.h, then llama.h's and mtmd.h's that the bindings copy.
const struct_entry structs[] = {
    LC_HEADER_STRUCTS,
    LC_LLAMA_STRUCTS,
#ifdef LLAMA_CANCEL_WITH_MTMD
    LC_MTMD_STRUCTS,
#endif
};

const struct_entry * find_struct(const char * name) {
    if (name == nullptr) {
        return nullptr;
    }
    for (const auto & s : structs) {
        if (std::strcmp(s.name, name) == 0) {
            return &s;
        }
    }
    return nullptr;
}

} // namespace

extern "C" int32_t llama_cancel_version(void) {
    return LLAMA_CANCEL_VERSION;
}

extern "C" int64_t llama_cancel_struct_size(const char * name) {
    const struct_entry * s = find_struct(name);
    return s != nullptr ? static_cast<int64_t>(s->size) : 0;
}

extern "C" int64_t llama_cancel_field_offset(const char * name, const char * field) {
    const struct_entry * s = find_struct(name);
    if (s == nullptr || field == nullptr) {
        return -1;
    }
    for (const field_entry * f = s->fields; f->name != nullptr; ++f) {
        if (std::strcmp(f->name, field) == 0) {
            return static_cast<int64_t>(f->offset);
        }
    }
    return -1;
}

extern "C" bool llama_cancel_has_mtmd(void) {
#ifdef LLAMA_CANCEL_WITH_MTMD
    return true;
#else
    return false;
#endif
}
