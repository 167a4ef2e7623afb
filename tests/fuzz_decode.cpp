// libFuzzer target for the input handling llama-cancel owns: llama_cancel_decode's validation of
// arbitrary batches and arguments (token ids, sequence ids and counts, sizes, NULL arrays, counters).
// Arrays always hold n_tokens entries, as llama_batch's contract requires; their values are the
// fuzzer's. Most inputs carry a set byte, so that validation runs alone (fast); the rest decode
// batches whose positions continue the sequence, and memory must match the committed count.
#include "support.h"

#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

struct reader {
    const uint8_t * p;
    size_t          n;
    uint8_t  u8() { return n > 0 ? (--n, *p++) : 0; }
    int32_t  i32() { int32_t v = 0; for (int i = 0; i < 4; ++i) v = (v << 8) | u8(); return v; }
};

llama_context * context() {
    static common::model_ptr   model;
    static common::context_ptr ctx;
    if (!ctx) {
        common::quiet_logs();
        common::load_backends();
        const char * path = std::getenv("LLAMA_CANCEL_TINY_MODEL");
        model = common::load_model(path != nullptr ? path : "tiny.gguf");
        if (!model) {
            std::abort();
        }
        common::context_options opt;
        opt.n_ctx = 256;
        opt.n_batch = 32;
        opt.n_ubatch = 16;
        opt.n_seq_max = 2;
        opt.n_threads = 1;
        ctx = common::make_context(model.get(), opt);
    }
    return ctx.get();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    llama_context * ctx = context();
    llama_memory_clear(llama_get_memory(ctx), true);
    reader in{data, size};
    const uint8_t mode = in.u8();
    const bool    validate_only = (mode & 3) != 0;
    const int32_t n = static_cast<int32_t>(in.u8() % 48) - 2; // around n_batch (32), negatives too

    const int32_t cap = n > 0 ? n : 0;
    std::vector<llama_token> token(cap);
    std::vector<llama_pos> pos(cap);
    std::vector<int32_t> n_seq(cap);
    std::vector<std::vector<llama_seq_id>> seq_store(cap);
    std::vector<llama_seq_id *> seq_ptr(cap);
    std::vector<int8_t> logits(cap);
    for (int32_t i = 0; i < cap; ++i) {
        token[i]  = validate_only ? in.i32() : static_cast<llama_token>(3 + in.u8());
        pos[i]    = i; // decodable batches continue an empty sequence
        n_seq[i]  = validate_only ? static_cast<int32_t>(in.u8() % 6) - 1 : 1;
        seq_store[i].resize(n_seq[i] > 0 ? n_seq[i] : 0);
        for (auto & s : seq_store[i]) {
            s = validate_only ? static_cast<llama_seq_id>(static_cast<int8_t>(in.u8())) : 0;
        }
        seq_ptr[i] = seq_store[i].empty() ? nullptr : seq_store[i].data();
        logits[i]  = static_cast<int8_t>(in.u8() & 1);
    }
    llama_batch b{};
    b.n_tokens = n;
    b.token    = (mode & 4) ? nullptr : token.data();
    b.pos      = (mode & 8) ? nullptr : pos.data();
    b.n_seq_id = (mode & 16) && validate_only ? nullptr : n_seq.data();
    b.seq_id   = (mode & 32) && validate_only ? nullptr : seq_ptr.data();
    b.logits   = (mode & 64) ? nullptr : logits.data();

    int8_t byte = validate_only ? 1 : 0;
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.byte = &byte;
    llama_cancel_decode_result r;
    llama_cancel_seq_result seqs[2] = {{-1, -1, -1}, {-1, -1, -1}};
    p.n_seq = static_cast<int32_t>(in.u8() % 4) - 1; // -1..2, seqs holds 2
    const int32_t st = llama_cancel_decode(ctx, b, &p, &r, (mode & 128) ? seqs : nullptr);

    if (st != r.status || (st == LLAMA_CANCEL_ERROR) != (r.message[0] != '\0')) {
        std::abort(); // the status and the message must agree
    }
    if (st != LLAMA_CANCEL_ERROR && (r.n_committed < 0 || r.n_committed > n)) {
        std::abort();
    }
    const llama_pos pos_max = llama_memory_seq_pos_max(llama_get_memory(ctx), 0);
    if (validate_only && pos_max != -1) {
        std::abort(); // a set byte or a rejected batch must leave memory untouched
    }
    if (st == LLAMA_CANCEL_OK && b.token != nullptr && pos_max != n - 1) {
        std::abort();
    }
    return 0;
}
