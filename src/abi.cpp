// The version and the struct layouts this library was compiled with, for FFI hosts that copy the
// layouts by hand (Dart ffigen, ctypes, koffi) and check them at load.
#include "llama-cancel.h"

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
    const field_entry * fields; // NULL-name terminated; NULL for llama.h's structs (size only)
};

#define LC_FIELD(S, F) { #F, offsetof(S, F) }
#define LC_END         { nullptr, 0 }

const field_entry hook_params[] = {
    LC_FIELD(llama_cancel_hook_params, interval_ms), LC_FIELD(llama_cancel_hook_params, flag),
    LC_FIELD(llama_cancel_hook_params, chain), LC_FIELD(llama_cancel_hook_params, chain_data), LC_END,
};
const field_entry hook_stats[] = {
    LC_FIELD(llama_cancel_hook_stats, checkpoints), LC_FIELD(llama_cancel_hook_stats, asks),
    LC_FIELD(llama_cancel_hook_stats, budget_flops), LC_FIELD(llama_cancel_hook_stats, interval_ms),
    LC_FIELD(llama_cancel_hook_stats, round_trip_ms), LC_END,
};
const field_entry snapshot_stats[] = {
    LC_FIELD(llama_cancel_snapshot_stats, snapshots), LC_FIELD(llama_cancel_snapshot_stats, shared),
    LC_FIELD(llama_cancel_snapshot_stats, held_steps),
    LC_FIELD(llama_cancel_snapshot_stats, restores), LC_FIELD(llama_cancel_snapshot_stats, bytes),
    LC_FIELD(llama_cancel_snapshot_stats, copy_ms), LC_END,
};
const field_entry decode_params[] = {
    LC_FIELD(llama_cancel_decode_params, flag), LC_FIELD(llama_cancel_decode_params, hook),
    LC_FIELD(llama_cancel_decode_params, abort_callback), LC_FIELD(llama_cancel_decode_params, abort_callback_data),
    LC_FIELD(llama_cancel_decode_params, seq_flags), LC_FIELD(llama_cancel_decode_params, max_stop_ms),
    LC_FIELD(llama_cancel_decode_params, n_seq), LC_END,
};
const field_entry seq_result[] = {
    LC_FIELD(llama_cancel_seq_result, n_committed), LC_FIELD(llama_cancel_seq_result, output),
    LC_FIELD(llama_cancel_seq_result, cancelled), LC_END,
};
const field_entry decode_result[] = {
    LC_FIELD(llama_cancel_decode_result, status), LC_FIELD(llama_cancel_decode_result, decode_ret),
    LC_FIELD(llama_cancel_decode_result, n_committed), LC_FIELD(llama_cancel_decode_result, output_base),
    LC_FIELD(llama_cancel_decode_result, n_decode_calls), LC_FIELD(llama_cancel_decode_result, n_seq_cancelled),
    LC_FIELD(llama_cancel_decode_result, longest_node_ms), LC_FIELD(llama_cancel_decode_result, budget_missed),
    LC_FIELD(llama_cancel_decode_result, message), LC_END,
};
const field_entry generate_params[] = {
    LC_FIELD(llama_cancel_generate_params, flag), LC_FIELD(llama_cancel_generate_params, hook),
    LC_FIELD(llama_cancel_generate_params, sampler), LC_FIELD(llama_cancel_generate_params, on_token),
    LC_FIELD(llama_cancel_generate_params, on_token_data), LC_FIELD(llama_cancel_generate_params, max_stop_ms),
    LC_FIELD(llama_cancel_generate_params, n_predict), LC_FIELD(llama_cancel_generate_params, seq_id),
    LC_FIELD(llama_cancel_generate_params, n_batch), LC_END,
};
const field_entry generate_result[] = {
    LC_FIELD(llama_cancel_generate_result, status), LC_FIELD(llama_cancel_generate_result, stop_reason),
    LC_FIELD(llama_cancel_generate_result, n_prompt_committed), LC_FIELD(llama_cancel_generate_result, n_generated),
    LC_FIELD(llama_cancel_generate_result, n_generated_committed), LC_FIELD(llama_cancel_generate_result, n_past),
    LC_FIELD(llama_cancel_generate_result, n_chunks_done), LC_FIELD(llama_cancel_generate_result, message), LC_END,
};
const field_entry load_result[] = {
    LC_FIELD(llama_cancel_load_result, status), LC_FIELD(llama_cancel_load_result, message), LC_END,
};
const field_entry mtmd_params[] = {
    LC_FIELD(llama_cancel_mtmd_params, flag), LC_FIELD(llama_cancel_mtmd_params, decode_hook),
    LC_FIELD(llama_cancel_mtmd_params, seq_flags), LC_FIELD(llama_cancel_mtmd_params, max_stop_ms),
    LC_FIELD(llama_cancel_mtmd_params, n_seq), LC_FIELD(llama_cancel_mtmd_params, seq_id),
    LC_FIELD(llama_cancel_mtmd_params, n_batch), LC_END,
};
const field_entry mtmd_result[] = {
    LC_FIELD(llama_cancel_mtmd_result, status), LC_FIELD(llama_cancel_mtmd_result, n_chunks_done),
    LC_FIELD(llama_cancel_mtmd_result, n_past), LC_FIELD(llama_cancel_mtmd_result, message), LC_END,
};
const field_entry tts_params[] = {
    LC_FIELD(llama_cancel_tts_params, text), LC_FIELD(llama_cancel_tts_params, lang),
    LC_FIELD(llama_cancel_tts_params, voice), LC_FIELD(llama_cancel_tts_params, sampler),
    LC_FIELD(llama_cancel_tts_params, top_p), LC_FIELD(llama_cancel_tts_params, temp),
    LC_FIELD(llama_cancel_tts_params, top_k), LC_FIELD(llama_cancel_tts_params, seed),
    LC_FIELD(llama_cancel_tts_params, seq_id), LC_FIELD(llama_cancel_tts_params, n_batch),
    LC_FIELD(llama_cancel_tts_params, max_frames), LC_FIELD(llama_cancel_tts_params, window), LC_END,
};
const field_entry tts_run_params[] = {
    LC_FIELD(llama_cancel_tts_run_params, flag), LC_FIELD(llama_cancel_tts_run_params, decode_hook),
    LC_FIELD(llama_cancel_tts_run_params, gen_hook), LC_FIELD(llama_cancel_tts_run_params, on_frame),
    LC_FIELD(llama_cancel_tts_run_params, on_frame_data), LC_FIELD(llama_cancel_tts_run_params, max_stop_ms),
    LC_FIELD(llama_cancel_tts_run_params, n_frames), LC_END,
};
const field_entry tts_result[] = {
    LC_FIELD(llama_cancel_tts_result, n_samples), LC_FIELD(llama_cancel_tts_result, status),
    LC_FIELD(llama_cancel_tts_result, stop_reason), LC_FIELD(llama_cancel_tts_result, step),
    LC_FIELD(llama_cancel_tts_result, n_frames), LC_FIELD(llama_cancel_tts_result, n_frames_pending),
    LC_FIELD(llama_cancel_tts_result, n_chunks_done), LC_FIELD(llama_cancel_tts_result, sample_rate),
    LC_FIELD(llama_cancel_tts_result, finished), LC_FIELD(llama_cancel_tts_result, message), LC_END,
};

// No padding anywhere (between fields or at the end) on 64-bit targets: the sum of the field
// sizes is the struct's size, so a field added to a struct always changes its size.
#if UINTPTR_MAX == UINT64_MAX
template <typename... F> constexpr size_t sum_of(F... sizes) {
    return (sizes + ... + size_t{0});
}
#    define LC_NO_HOLES(S, ...) static_assert(sizeof(S) == sum_of(__VA_ARGS__), #S " has padding")
#    define LC_SZ(S, F)         sizeof(S::F)
LC_NO_HOLES(llama_cancel_hook_params, LC_SZ(llama_cancel_hook_params, interval_ms),
            LC_SZ(llama_cancel_hook_params, flag), LC_SZ(llama_cancel_hook_params, chain),
            LC_SZ(llama_cancel_hook_params, chain_data));
LC_NO_HOLES(llama_cancel_hook_stats, 5 * sizeof(uint64_t));
LC_NO_HOLES(llama_cancel_snapshot_stats, 6 * sizeof(uint64_t));
LC_NO_HOLES(llama_cancel_decode_params, 5 * sizeof(void *), sizeof(float), sizeof(int32_t));
LC_NO_HOLES(llama_cancel_seq_result, 3 * sizeof(int32_t));
LC_NO_HOLES(llama_cancel_decode_result, 8 * sizeof(int32_t), 256);
LC_NO_HOLES(llama_cancel_generate_params, 5 * sizeof(void *), 4 * sizeof(int32_t));
LC_NO_HOLES(llama_cancel_generate_result, 7 * sizeof(int32_t), 256);
LC_NO_HOLES(llama_cancel_load_result, sizeof(int32_t), 256);
LC_NO_HOLES(llama_cancel_mtmd_params, 3 * sizeof(void *), 4 * sizeof(int32_t));
LC_NO_HOLES(llama_cancel_mtmd_result, 3 * sizeof(int32_t), 256);
LC_NO_HOLES(llama_cancel_tts_params, 4 * sizeof(void *), 8 * sizeof(int32_t));
LC_NO_HOLES(llama_cancel_tts_run_params, 5 * sizeof(void *), sizeof(float), sizeof(int32_t));
LC_NO_HOLES(llama_cancel_tts_result, sizeof(int64_t), 8 * sizeof(int32_t), 256);
#endif

#define LC_STRUCT(S, FIELDS) { #S, sizeof(S), FIELDS }

// Every public struct of llama-cancel.h. A struct added to the header goes here too: the bindings'
// tests read the header and fail on a struct or field this table does not know.
const struct_entry structs[] = {
    LC_STRUCT(llama_cancel_hook_params, hook_params),
    LC_STRUCT(llama_cancel_hook_stats, hook_stats),
    LC_STRUCT(llama_cancel_snapshot_stats, snapshot_stats),
    LC_STRUCT(llama_cancel_decode_params, decode_params),
    LC_STRUCT(llama_cancel_seq_result, seq_result),
    LC_STRUCT(llama_cancel_decode_result, decode_result),
    LC_STRUCT(llama_cancel_generate_params, generate_params),
    LC_STRUCT(llama_cancel_generate_result, generate_result),
    LC_STRUCT(llama_cancel_load_result, load_result),
    LC_STRUCT(llama_cancel_mtmd_params, mtmd_params),
    LC_STRUCT(llama_cancel_mtmd_result, mtmd_result),
    LC_STRUCT(llama_cancel_tts_params, tts_params),
    LC_STRUCT(llama_cancel_tts_run_params, tts_run_params),
    LC_STRUCT(llama_cancel_tts_result, tts_result),
    LC_STRUCT(llama_batch, nullptr),
    LC_STRUCT(llama_model_params, nullptr),
    LC_STRUCT(llama_context_params, nullptr),
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
    if (s == nullptr || s->fields == nullptr || field == nullptr) {
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
