// Multimodal (mtmd) chunks under the caller's byte: clip encodes stopped through the eval-callback
// hook bound to the mtmd context, embedding and text decodes through llama_cancel_decode, and a
// chunk-granular rollback so that an interrupted evaluation resumes bit-identically.
//
// Upstream (llama.cpp 0.7.0) reports a stopped clip graph as success (mtmd_encode_chunk returns 0
// with garbage embeddings), and mtmd_helper_eval_chunks leaves the finished sub-batches of a
// stopped chunk in memory without saying where to resume. This file never decodes embeddings of
// a stopped encode and always leaves memory at a chunk boundary.
//
// On a decoder with M-RoPE (mtmd_decode_use_mrope: the text model's rope type is MROPE or IMROPE)
// each image or audio embedding takes 4 positions, as upstream's helper gives them: section-major
// [t | y | x | z] in llama_batch.pos, t the position in memory. An image's t is the same for all
// its tokens and the chunk advances n_past by mtmd_input_chunk_get_n_pos (max of the grid's
// sides), so memory's last position after an image is not n_past - 1; the chunk rollback removes
// from the chunk's first position, which holds whatever the stopped chunk wrote.
//
// With LLAMA_CANCEL_MTMD_BATCH_ENCODE a run of media chunks that mtmd_batch_add_chunk takes together
// (images of one size on a projector whose clip graph batches: InternVL's tiles and thumbnail, ...)
// is encoded by one mtmd_batch_encode, under one call like a single encode; each chunk of it is then
// decoded, snapshotted and rolled back as its own. The batches depend on the chunk list alone: each
// is formed greedily from the first media chunk after a text chunk (or chunk 0), as upstream's CLI
// forms them from there, whatever first_chunk is, so that a resume inside a batch encodes the very
// same batch again (chunks before first_chunk included) and reads the same embeddings, on backends
// where a batched image's embeddings differ from its own encode's too (Vulkan here).
#include "llama-cancel.h"

#include "abi/abi_guard.h"
#include "checkpoints/call.h"
#include "mtmd/clip_call.h"
#include "abi/checks.h"
#include "checkpoints/byte.h"
#include "checkpoints/hook.h"
#include "decode/memory_snapshot.h"
#include "decode/seq_batch.h"
#include "abi/status.h"

#include "mtmd.h"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <exception>
#include <vector>

namespace {

using llama_cancel::fail;
using llama_cancel::k_mrope_sections;

// What one chunk's evaluation ended with; `message` is set for errors.
struct chunk_outcome {
    int32_t status = LLAMA_CANCEL_OK;
    char    message[256] = {0};
};

template <typename... Args> chunk_outcome chunk_fail(const char * fmt, Args... args) {
    chunk_outcome o;
    fail(&o, fmt, args...);
    return o;
}

chunk_outcome from_decode(int32_t status, const llama_cancel_decode_result & dr, const char * what) {
    chunk_outcome o;
    o.status = status;
    if (status == LLAMA_CANCEL_ERROR) {
        std::snprintf(o.message, sizeof(o.message), "decoding %s: %.200s", what, dr.message);
    }
    return o;
}

// The positions of a media chunk's n_tokens embeddings from pos0, section-major: one section
// (pos0 + i) without M-RoPE; with it, upstream's: an image's mtmd_image_tokens_get_decoder_pos
// (t, y, x, z in that order), audio pos0 + i in all four.
std::vector<llama_pos> media_positions(const mtmd_input_chunk * chunk, llama_pos pos0, int32_t n_tokens,
                                       int32_t sections) {
    const size_t n = static_cast<size_t>(n_tokens);
    std::vector<llama_pos> pos(n * sections);
    const mtmd_image_tokens * image = mtmd_input_chunk_get_tokens_image(chunk);
    for (size_t i = 0; i < n; ++i) {
        if (sections == 1 || image == nullptr) {
            for (int32_t s = 0; s < sections; ++s) {
                pos[s * n + i] = pos0 + static_cast<llama_pos>(i);
            }
            continue;
        }
        const mtmd_decoder_pos d = mtmd_image_tokens_get_decoder_pos(image, pos0, i);
        pos[i]         = static_cast<llama_pos>(d.t);
        pos[n + i]     = static_cast<llama_pos>(d.y);
        pos[2 * n + i] = static_cast<llama_pos>(d.x);
        pos[3 * n + i] = static_cast<llama_pos>(d.z);
    }
    return pos;
}

// The media batch encoded last (LLAMA_CANCEL_MTMD_BATCH_ENCODE): chunks [begin, end) of the list,
// their embeddings in `b` once `encoded`.
struct media_batch {
    mtmd_batch * b       = nullptr;
    size_t       begin   = 0;
    size_t       end     = 0;
    bool         encoded = false;

    media_batch() = default;
    media_batch(const media_batch &) = delete;
    media_batch & operator=(const media_batch &) = delete;
    ~media_batch() { reset(); }
    void reset() {
        if (b != nullptr) {
            mtmd_batch_free(b);
        }
        b       = nullptr;
        begin   = end = 0;
        encoded = false;
    }
    bool holds(size_t i) const { return encoded && begin <= i && i < end; }
};

struct eval_state {
    mtmd_context *                   mctx;
    llama_context *                  lctx;
    const llama_cancel_mtmd_params & p;
    int32_t                          n_batch;
    llama_cancel::seq_batch &        batch;
    const int8_t *                   seq_byte; // the byte of p.seq_id among p.seq_bytes, or NULL
    const mtmd_input_chunks *        chunks;
    bool                             batch_encode; // LLAMA_CANCEL_MTMD_BATCH_ENCODE
    int32_t &                        reach;        // enum llama_cancel_reach: the worst of the decodes'
    int32_t &                        mtmd_reach;   // and of the encodes'
    media_batch                      media;

    int32_t decode(const llama_batch & b, const llama_cancel_decode_params & dp, llama_cancel_decode_result & dr) {
        const int32_t st = llama_cancel_decode(lctx, b, &dp, &dr, nullptr);
        reach = std::max(reach, dr.reach);
        return st;
    }

    bool stop_set() const { return llama_cancel::byte_is_set(p.byte) || llama_cancel::byte_is_set(seq_byte); }
};

// The byte of the evaluated sequence among the per-sequence bytes, or NULL.
const int8_t * seq_byte_of(const llama_cancel_mtmd_params & p) {
    return p.seq_bytes != nullptr && p.seq_id < p.n_seq ? p.seq_bytes[p.seq_id] : nullptr;
}

// Text and embedding decodes: the chunk's last output is read by negative index (llama_get_logits_ith(-1)).
// A stop-time budget slices causal decodes only: non-causal attention must see the slice whole.
llama_cancel_decode_params decode_params(const llama_cancel_mtmd_params & p, bool causal = true) {
    llama_cancel_decode_params dp = llama_cancel_decode_default_params();
    dp.byte        = p.byte;
    dp.seq_bytes   = p.seq_bytes; // the sequence's own byte drops it: the decode is then cancelled
    dp.n_seq       = p.n_seq;
    dp.hook        = p.hook;
    dp.max_stop_ms = causal ? p.max_stop_ms : 0.0f;
    return dp;
}

chunk_outcome eval_text(eval_state & s, const mtmd_input_chunk * chunk, llama_pos pos0, bool output_last) {
    size_t n = 0;
    const llama_token * tokens = mtmd_input_chunk_get_tokens_text(chunk, &n);
    if (n == 0) {
        return {};
    }
    if (tokens == nullptr) {
        return chunk_fail("text chunk without tokens");
    }
    const llama_cancel_decode_params dp = decode_params(s.p);
    llama_cancel_decode_result dr{};
    const int32_t n_tokens = static_cast<int32_t>(n);
    for (int32_t a = 0; a < n_tokens; a += s.n_batch) {
        const int32_t k    = std::min(s.n_batch, n_tokens - a);
        const bool    last = a + k == n_tokens;
        const llama_batch b  = s.batch.get(tokens + a, nullptr, k, pos0 + a, output_last && last);
        const int32_t     st = s.decode(b, dp, dr);
        if (st != LLAMA_CANCEL_OK) {
            return from_decode(st, dr, "text");
        }
    }
    return {};
}

// Restores causal attention however the embedding decode ends (mtmd's helper does the same).
struct causal_guard {
    llama_context * ctx = nullptr;
    ~causal_guard() {
        if (ctx != nullptr) {
            llama_set_causal_attn(ctx, true);
        }
    }
};

bool is_media(const mtmd_input_chunks * chunks, size_t i) {
    return mtmd_input_chunk_get_type(mtmd_input_chunks_get(chunks, i)) != MTMD_INPUT_CHUNK_TYPE_TEXT;
}

// Runs `encode_fn` (mtmd_encode_chunk or mtmd_batch_encode) as a call of its own: the hook (or the
// stateless callback) bound to mctx reads its bytes and reports a graph it stopped, which libmtmd
// still returns 0 for. CANCELLED, the wrong hook's error, or OK with *ret the encode's return.
template <typename Encode> chunk_outcome run_encode(eval_state & s, Encode encode_fn, int32_t * ret) {
    const llama_cancel::clip_outcome c = llama_cancel::run_clip_call(s.p.byte, s.seq_byte, s.p.mtmd_hook, encode_fn, ret,
                                                                        s.mtmd_reach);
    if (c == llama_cancel::clip_outcome::wrong_hook) {
        return chunk_fail("mtmd_hook is not the hook bound to mctx; nothing was encoded");
    }
    if (c == llama_cancel::clip_outcome::stopped || s.stop_set()) {
        chunk_outcome o;
        o.status = LLAMA_CANCEL_CANCELLED;
        return o;
    }
    return {};
}

// The batch that holds chunk i, formed as in the file comment, in s.media (not yet encoded).
// False with `o` set when libmtmd refuses the batch's first chunk.
bool form_batch(eval_state & s, size_t i, chunk_outcome & o) {
    const size_t n_chunks = mtmd_input_chunks_size(s.chunks);
    size_t       begin    = i;
    while (begin > 0 && is_media(s.chunks, begin - 1)) {
        --begin;
    }
    for (;;) {
        s.media.reset();
        s.media.b = mtmd_batch_init(s.mctx);
        if (s.media.b == nullptr) {
            o = chunk_fail("mtmd_batch_init returned NULL");
            return false;
        }
        const int32_t added = mtmd_batch_add_chunk(s.media.b, mtmd_input_chunks_get(s.chunks, begin));
        if (added != 0) {
            o = chunk_fail("mtmd_batch_add_chunk refused chunk %zu, the first of its batch (returned %d)", begin,
                           added);
            return false;
        }
        size_t end = begin + 1;
        // 2 (too large, or a projector that does not batch) and 3 (another size) end the batch.
        while (end < n_chunks && is_media(s.chunks, end) &&
               mtmd_batch_add_chunk(s.media.b, mtmd_input_chunks_get(s.chunks, end)) == 0) {
            ++end;
        }
        if (i < end) {
            s.media.begin = begin;
            s.media.end   = end;
            return true;
        }
        begin = end;
    }
}

// The embeddings of media chunk i: its own mtmd_encode_chunk, or (LLAMA_CANCEL_MTMD_BATCH_ENCODE)
// its batch's, encoded when the batch's first chunk still to decode comes. A batch of one chunk is
// encoded on its own, as without the option. NULL with `o` set (CANCELLED or an error) otherwise.
const float * media_embd(eval_state & s, size_t i, const mtmd_input_chunk * chunk, const char * name,
                         chunk_outcome & o) {
    int32_t ret = 0;
    if (s.batch_encode && !s.media.holds(i)) {
        if (!form_batch(s, i, o)) {
            return nullptr;
        }
        if (s.media.end - s.media.begin == 1) {
            s.media.reset();
        } else {
            o = run_encode(s, [&] { return mtmd_batch_encode(s.media.b); }, &ret);
            if (o.status != LLAMA_CANCEL_OK || ret != 0) {
                if (o.status == LLAMA_CANCEL_OK) {
                    o = chunk_fail("mtmd_batch_encode failed on chunks [%zu, %zu) (returned %d)", s.media.begin,
                                   s.media.end, ret);
                }
                s.media.reset(); // a stopped batch's embeddings are garbage: never decoded
                return nullptr;
            }
            s.media.encoded = true;
        }
    }
    if (s.media.holds(i)) {
        const float * embd = mtmd_batch_get_output_embd(s.media.b, chunk);
        if (embd == nullptr) {
            o = chunk_fail("mtmd_batch_get_output_embd returned NULL for the %s chunk", name);
        }
        return embd;
    }
    o = run_encode(s, [&] { return mtmd_encode_chunk(s.mctx, chunk); }, &ret);
    if (o.status != LLAMA_CANCEL_OK) {
        return nullptr;
    }
    if (ret != 0) {
        o = chunk_fail("mtmd_encode_chunk failed on the %s chunk (returned %d)", name, ret);
        return nullptr;
    }
    const float * embd = mtmd_get_output_embd(s.mctx);
    if (embd == nullptr) {
        o = chunk_fail("mtmd_get_output_embd returned NULL after encoding the %s chunk", name);
    }
    return embd;
}

chunk_outcome eval_media(eval_state & s, size_t i, const mtmd_input_chunk * chunk, llama_pos pos0,
                         bool output_last) {
    const char *  name     = mtmd_input_chunk_get_type(chunk) == MTMD_INPUT_CHUNK_TYPE_IMAGE ? "image" : "audio";
    const int32_t n_tokens = static_cast<int32_t>(mtmd_input_chunk_get_n_tokens(chunk));

    chunk_outcome o;
    const float * embd = media_embd(s, i, chunk, name, o);
    if (embd == nullptr) {
        return o;
    }
    if (n_tokens <= 0) {
        return {};
    }

    causal_guard causal;
    if (mtmd_decode_use_non_causal(s.mctx, chunk)) {
        llama_set_causal_attn(s.lctx, false);
        causal.ctx = s.lctx;
    }
    const llama_cancel_decode_params dp = decode_params(s.p, causal.ctx == nullptr);
    llama_cancel_decode_result dr{};
    const size_t  n_embd   = static_cast<size_t>(llama_model_n_embd_inp(llama_get_model(s.lctx)));
    const int32_t sections = mtmd_decode_use_mrope(s.mctx) ? k_mrope_sections : 1;
    const std::vector<llama_pos> pos = media_positions(chunk, pos0, n_tokens, sections);
    for (int32_t a = 0; a < n_tokens; a += s.n_batch) {
        const int32_t k    = std::min(s.n_batch, n_tokens - a);
        const bool    last = a + k == n_tokens;
        const llama_batch b = s.batch.get_media(embd + static_cast<size_t>(a) * n_embd, k, a, pos, n_tokens, sections,
                                                output_last && last);
        const int32_t st = s.decode(b, dp, dr);
        if (st != LLAMA_CANCEL_OK) {
            return from_decode(st, dr, name);
        }
    }
    return {};
}

// The arguments llama.cpp and mtmd would otherwise assert on or reject without saying why; the
// n_batch to use in `n_batch`. LLAMA_CANCEL_OK when all are fine.
int32_t check_args(mtmd_context * mctx, llama_context * lctx, const mtmd_input_chunks * chunks, int32_t first_chunk,
                   llama_pos n_past, const llama_cancel_mtmd_params & p, llama_cancel_mtmd_result * r,
                   int32_t * n_batch) {
    if (mctx == nullptr) {
        return fail(r, "mctx is NULL");
    }
    if (lctx == nullptr) {
        return fail(r, "lctx is NULL");
    }
    if (chunks == nullptr) {
        return fail(r, "chunks is NULL");
    }
    const size_t n_chunks = mtmd_input_chunks_size(chunks);
    if (first_chunk < 0 || static_cast<size_t>(first_chunk) > n_chunks) {
        return fail(r, "first_chunk %d is outside [0, %zu]", first_chunk, n_chunks);
    }
    if (n_past < 0) {
        return fail(r, "n_past is %d; positions start at 0", n_past);
    }
    if (!llama_cancel::check_seq_id(lctx, p.seq_id, r)) {
        return LLAMA_CANCEL_ERROR;
    }
    if (p.n_seq < 0 || (p.seq_bytes != nullptr && p.n_seq == 0)) {
        return fail(r, "n_seq is %d; seq_bytes needs n_seq > 0 entries", p.n_seq);
    }
    if (!llama_cancel::resolve_n_batch(lctx, p.n_batch, r, n_batch)) {
        return LLAMA_CANCEL_ERROR;
    }
    for (size_t i = static_cast<size_t>(first_chunk); i < n_chunks; ++i) {
        const mtmd_input_chunk * c = mtmd_input_chunks_get(chunks, i);
        if (c == nullptr) {
            return fail(r, "chunk %zu is NULL", i);
        }
        const auto type = mtmd_input_chunk_get_type(c);
        if (type != MTMD_INPUT_CHUNK_TYPE_TEXT && type != MTMD_INPUT_CHUNK_TYPE_IMAGE &&
            type != MTMD_INPUT_CHUNK_TYPE_AUDIO) {
            return fail(r, "chunk %zu has unknown type %d", i, static_cast<int>(type));
        }
    }
    return LLAMA_CANCEL_OK;
}

int32_t eval_chunks(mtmd_context * mctx, llama_context * lctx, const mtmd_input_chunks * chunks, int32_t first_chunk,
                    llama_pos n_past, const llama_cancel_mtmd_params & p, llama_cancel_mtmd_result * r,
                    int32_t & reach, int32_t & mtmd_reach) {
    if (r != nullptr) {
        r->n_chunks_done = first_chunk;
        r->n_past        = n_past;
    }
    constexpr uint32_t known = LLAMA_CANCEL_MTMD_BATCH_ENCODE;
    if ((p.options & ~known) != 0) {
        return fail(r, "options 0x%x has unknown bits 0x%x; nothing was evaluated", p.options, p.options & ~known);
    }
    int32_t n_batch = 0;
    if (check_args(mctx, lctx, chunks, first_chunk, n_past, p, r, &n_batch) != LLAMA_CANCEL_OK) {
        return LLAMA_CANCEL_ERROR;
    }
    const size_t n_chunks = mtmd_input_chunks_size(chunks);

    llama_cancel::seq_batch batch(n_batch, p.seq_id);
    eval_state  s{mctx, lctx, p, n_batch, batch, seq_byte_of(p), chunks,
                 (p.options & LLAMA_CANCEL_MTMD_BATCH_ENCODE) != 0, reach, mtmd_reach, {}};
    llama_pos   pos = n_past;
    // What the sequence holds before each chunk, to remove a stopped chunk whole (with its
    // recurrent state on models that have one): the decode hook's chunk snapshot, kept across calls,
    // shared with a spare sequence where the context has one, as a decode's.
    llama_cancel::memory_snapshot   own;
    llama_cancel::memory_snapshot * kept     = llama_cancel::hook_chunk_snapshot(p.hook);
    llama_cancel::memory_snapshot & snapshot = kept != nullptr ? *kept : own;
    llama_cancel::snapshot_release  spares{snapshot};
    const bool with_state = llama_cancel::memory_snapshot::needs_state(lctx);
    for (size_t i = static_cast<size_t>(first_chunk); i < n_chunks; ++i) {
        if (s.stop_set()) {
            if (r != nullptr) {
                r->status = LLAMA_CANCEL_CANCELLED;
            }
            return LLAMA_CANCEL_CANCELLED;
        }
        const mtmd_input_chunk * chunk       = mtmd_input_chunks_get(chunks, i);
        const bool               output_last = i + 1 == n_chunks && p.logits_last != 0;
        chunk_outcome            o;
        if (!snapshot.capture(lctx, {p.seq_id}, with_state, true)) {
            return fail(r, "chunk %zu: could not copy the recurrent state of sequence %d", i, p.seq_id);
        }
        try {
            o = mtmd_input_chunk_get_type(chunk) == MTMD_INPUT_CHUNK_TYPE_TEXT ? eval_text(s, chunk, pos, output_last)
                                                                               : eval_media(s, i, chunk, pos, output_last);
        } catch (const std::exception & e) {
            o = chunk_fail("internal error: %s", e.what()); // rolled back below like any failed chunk
        } catch (...) {
            o = chunk_fail("%s", "internal error: unknown exception");
        }
        if (o.status != LLAMA_CANCEL_OK) {
            // Chunk granularity: whatever this chunk wrote goes, so that memory ends at a boundary.
            llama_seq_id failed = -1;
            if (!snapshot.restore(lctx, &failed)) {
                if (r != nullptr) {
                    r->n_chunks_done = 0; // the sequence is empty: everything goes again
                    r->n_past        = 0;
                }
                return fail(r, "chunk %zu: could not restore the state of sequence %d after the stop; that "
                               "sequence was cleared", i, failed);
            }
            if (r != nullptr) {
                r->status = o.status;
                if (o.status == LLAMA_CANCEL_ERROR) {
                    std::snprintf(r->message, sizeof(r->message), "chunk %zu: %.200s", i, o.message);
                }
            }
            return o.status;
        }
        pos += mtmd_input_chunk_get_n_pos(chunk);
        if (r != nullptr) {
            r->n_chunks_done = static_cast<int32_t>(i + 1);
            r->n_past        = pos;
        }
    }
    if (r != nullptr) {
        r->status = LLAMA_CANCEL_OK;
    }
    return LLAMA_CANCEL_OK;
}

} // namespace

extern "C" int32_t llama_cancel_mtmd_eval_chunks(mtmd_context * mctx, llama_context * lctx,
                                                 const mtmd_input_chunks * chunks, int32_t first_chunk,
                                                 llama_pos n_past, const llama_cancel_mtmd_params * params,
                                                 llama_cancel_mtmd_result * result) {
    if (result != nullptr) {
        std::memset(result, 0, sizeof(*result));
    }
    const llama_cancel_mtmd_params p = params != nullptr ? *params : llama_cancel_mtmd_default_params();
    // The guards have restored causal attention and the current call, and freed the media batch, by
    // the time an exception reaches abi_guard.
    int32_t reach = LLAMA_CANCEL_REACH_GRAPH, mtmd_reach = LLAMA_CANCEL_REACH_GRAPH;
    const int32_t status = llama_cancel::abi_guard(result, static_cast<int32_t>(LLAMA_CANCEL_ERROR), [&] {
        const llama_cancel::run_scope run; // a stop may wait a tenth of the evaluation so far
        return eval_chunks(mctx, lctx, chunks, first_chunk, n_past, p, result, reach, mtmd_reach);
    });
    if (result != nullptr) {
        result->reach      = reach;
        result->mtmd_reach = mtmd_reach;
    }
    return status;
}
