// `llama-cancel embed`: a file of lines in, one pooled vector per line out (JSON, or .npy), through
// llama_cancel_embed; Ctrl-C stores the byte, the graph in flight stops, and the vectors of every
// line whose group finished are written. A second Ctrl-C exits at once.
#include "commands.h"
#include "cli/ctrl_c.h"
#include "common/args.h"
#include "support.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

struct embed_options {
    std::string model, input, output, pooling;
    int         threads = 2, ubatch = 512, batch = 2048, seqs = 32;
};

int parse_options(int argc, char ** argv, embed_options & o) {
    cli_args::parser p("usage: llama-cancel embed --model PATH --input FILE [--output FILE.json|FILE.npy]\n"
                       "                         [--pooling mean|cls|last|rank] [--ubatch N] [--batch N] [--seqs N]\n"
                       "                         [--threads N]\n");
    p.option("--model|-m", &o.model, "PATH", "an embedding model (or a reranker: --pooling rank)")
        .option("--input|-i", &o.input, "FILE", "UTF-8 text, one passage per line (empty lines are left out)")
        .option("--output|-o", &o.output, "FILE", "where the vectors go: .npy (float32, lines x n) or JSON (default: stdout)")
        .option("--pooling", &o.pooling, "KIND", "mean, cls, last or rank (default: the model's)")
        .option("--ubatch", &o.ubatch, "N", "n_ubatch: the longest line, in tokens, and a graph's size")
        .option("--batch", &o.batch, "N", "tokens per llama_cancel_embed call (its memory cleared before each)")
        .option("--seqs", &o.seqs, "N", "lines per llama_cancel_embed call (the context's n_seq_max)")
        .option("--threads|-t", &o.threads, "N", "CPU threads");
    const int rc = p.parse(argc, argv);
    if (rc >= 0) {
        return rc;
    }
    const bool bad_pool = !o.pooling.empty() && o.pooling != "mean" && o.pooling != "cls" && o.pooling != "last" &&
                          o.pooling != "rank";
    return p.check({{o.model.empty(), "--model is required"},
                    {o.input.empty(), "--input is required"},
                    {bad_pool, "--pooling must be mean, cls, last or rank"},
                    {o.ubatch < 1 || o.batch < o.ubatch, "--ubatch must be at least 1 and --batch at least --ubatch"},
                    {o.seqs < 1 || o.seqs > 256, "--seqs must be 1..256"},
                    {o.threads < 1, "--threads must be at least 1"}});
}

enum llama_pooling_type pooling_of(const std::string & s) {
    return s == "mean" ? LLAMA_POOLING_TYPE_MEAN
         : s == "cls"  ? LLAMA_POOLING_TYPE_CLS
         : s == "last" ? LLAMA_POOLING_TYPE_LAST
         : s == "rank" ? LLAMA_POOLING_TYPE_RANK
                       : LLAMA_POOLING_TYPE_UNSPECIFIED;
}

// The input's non-empty lines, each tokenized as llama.cpp's embedding example does (special tokens
// added: BERT's [CLS] ... [SEP]); false with a message for an unreadable file or a line over n_ubatch.
bool read_lines(const embed_options & o, const llama_model * model, std::vector<std::vector<llama_token>> & lines) {
    std::ifstream in(o.input);
    if (!in) {
        std::fprintf(stderr, "error: cannot read %s\n", o.input.c_str());
        return false;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
        if (line.empty()) {
            continue;
        }
        std::vector<llama_token> t(line.size() + 8);
        const int k = llama_tokenize(vocab, line.c_str(), static_cast<int32_t>(line.size()), t.data(),
                                     static_cast<int32_t>(t.size()), true, false);
        if (k <= 0 || k > o.ubatch) {
            std::fprintf(stderr, "error: line %d has %d tokens; a line needs 1..--ubatch (%d)\n", n, k, o.ubatch);
            return false;
        }
        t.resize(k);
        lines.push_back(std::move(t));
    }
    if (lines.empty()) {
        std::fprintf(stderr, "error: %s has no non-empty line\n", o.input.c_str());
        return false;
    }
    return true;
}

// Vectors of the first n_done lines: .npy (format 1.0, little-endian float32, C order) or JSON.
bool write_vectors(const std::string & path, const std::vector<float> & v, int32_t n_done, int32_t n_out,
                   size_t n_lines, bool cancelled) {
    const bool npy = path.size() > 4 && path.compare(path.size() - 4, 4, ".npy") == 0;
    FILE * f = path.empty() ? stdout : std::fopen(path.c_str(), "wb");
    if (f == nullptr) {
        std::fprintf(stderr, "error: cannot write %s\n", path.c_str());
        return false;
    }
    if (npy) {
        std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(n_done) + ", " +
                             std::to_string(n_out) + "), }";
        header.append(63 - (10 + header.size()) % 64, ' '); // 64-byte aligned with the newline
        header += '\n';
        const unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                                       static_cast<unsigned char>(header.size() & 0xff),
                                       static_cast<unsigned char>(header.size() >> 8)};
        std::fwrite(pre, 1, sizeof(pre), f);
        std::fwrite(header.data(), 1, header.size(), f);
        std::fwrite(v.data(), sizeof(float), static_cast<size_t>(n_done) * n_out, f);
    } else {
        std::fprintf(f, "{\"n_lines\": %zu, \"n_done\": %d, \"cancelled\": %s, \"n_out\": %d, \"vectors\": [", n_lines,
                     n_done, cancelled ? "true" : "false", n_out);
        for (int32_t l = 0; l < n_done; ++l) {
            std::fprintf(f, "%s\n  [", l > 0 ? "," : "");
            for (int32_t k = 0; k < n_out; ++k) {
                std::fprintf(f, "%s%.9g", k > 0 ? ", " : "", v[static_cast<size_t>(l) * n_out + k]);
            }
            std::fprintf(f, "]");
        }
        std::fprintf(f, "\n]}\n");
    }
    return f == stdout ? std::fflush(f) == 0 : std::fclose(f) == 0;
}

// Says once, on stderr, that the first graph is computing: from then on a Ctrl-C stops a graph in
// flight (tests wait for it rather than for a time). The hook's chained callback; asks for nothing.
bool announce(ggml_tensor *, bool ask, void * d) {
    auto * done = static_cast<bool *>(d);
    if (ask && !*done) {
        *done = true;
        static const char msg[] = "[embedding]\n";
        (void) !write(STDERR_FILENO, msg, sizeof(msg) - 1);
    }
    return false;
}

// The lines in calls of at most --seqs lines and --batch tokens, each call's sequences 0..k-1 on a
// cleared memory; returns the status, *n_done the lines whose vectors are in `v`.
int32_t embed_lines(llama_context * ctx, llama_cancel_hook * hook, const embed_options & o,
                    const std::vector<std::vector<llama_token>> & lines, std::vector<float> & v, int32_t n_out,
                    int32_t * n_done, char * message) {
    std::vector<float> rows(static_cast<size_t>(o.seqs) * n_out);
    llama_cancel_embed_params p = llama_cancel_embed_default_params();
    p.byte = ctrl_c::byte();
    p.hook = hook;
    size_t first = 0;
    while (first < lines.size()) {
        common::owned_batch b;
        size_t last = first;
        while (last < lines.size() && last - first < static_cast<size_t>(o.seqs) &&
               b.size() + static_cast<int32_t>(lines[last].size()) <= o.batch) {
            for (size_t i = 0; i < lines[last].size(); ++i) {
                b.add(lines[last][i], static_cast<llama_pos>(i), {static_cast<llama_seq_id>(last - first)}, true);
            }
            ++last;
        }
        if (llama_get_memory(ctx) != nullptr) {
            llama_memory_clear(llama_get_memory(ctx), true);
        }
        llama_cancel_embed_result r;
        const int32_t status = llama_cancel_embed(ctx, b.get(), &p, rows.data(), static_cast<int64_t>(rows.size()), &r);
        const size_t finished = status == LLAMA_CANCEL_OK ? last - first : static_cast<size_t>(r.n_seq_done);
        std::copy(rows.begin(), rows.begin() + finished * n_out, v.begin() + first * n_out); // sequences in line order
        *n_done = static_cast<int32_t>(first + finished);
        if (status != LLAMA_CANCEL_OK) {
            std::snprintf(message, 256, "%s", r.message);
            return status;
        }
        std::fprintf(stderr, "\r[%d/%zu lines]", *n_done, lines.size());
        first = last;
    }
    std::fprintf(stderr, "\n");
    return LLAMA_CANCEL_OK;
}

} // namespace

int embed_main(int argc, char ** argv) {
    embed_options o;
    int rc = parse_options(argc, argv, o);
    if (rc >= 0) {
        return rc;
    }
    ctrl_c::install("\nsecond Ctrl-C: exiting\n");
    common::quiet_logs();
    common::load_backends();
    llama_cancel_load_result lr;
    common::model_ptr model(llama_cancel_model_load(o.model.c_str(), llama_model_default_params(), ctrl_c::byte(), &lr));
    if (!model) {
        std::fprintf(stderr, "%s: %s\n", lr.status == LLAMA_CANCEL_CANCELLED ? "cancelled" : "error", lr.message);
        return lr.status == LLAMA_CANCEL_CANCELLED ? 130 : 1;
    }
    std::vector<std::vector<llama_token>> lines;
    if (!read_lines(o, model.get(), lines)) {
        return 1;
    }
    bool                    announced = false;
    common::hook_ptr        hook      = common::make_hook(announce, &announced); // outlives the context
    common::context_options opt;
    opt.cb_eval      = llama_cancel_hook_eval_callback;
    opt.cb_eval_data = hook.get();
    opt.n_ctx        = static_cast<uint32_t>(o.batch);
    opt.n_batch      = static_cast<uint32_t>(o.batch);
    opt.n_ubatch     = static_cast<uint32_t>(o.ubatch);
    opt.n_seq_max    = static_cast<uint32_t>(o.seqs);
    opt.kv_unified   = true; // a call's lines share the --batch cells
    opt.n_threads    = o.threads;
    opt.embeddings   = true;
    opt.pooling      = pooling_of(o.pooling);
    common::context_ptr ctx = hook ? common::make_context(model.get(), opt) : nullptr;
    const int32_t n_out = ctx ? llama_cancel_embed_n_out(ctx.get()) : 0;
    if (n_out <= 0) {
        std::fprintf(stderr, "error: cannot make an embeddings context that pools (is it an embedding model? --pooling)\n");
        return 1;
    }
    std::vector<float> v(lines.size() * n_out);
    int32_t n_done = 0;
    char    message[256] = {0};
    const double  t0     = common::now_ms();
    const int32_t status = embed_lines(ctx.get(), hook.get(), o, lines, v, n_out, &n_done, message);
    if (status == LLAMA_CANCEL_CANCELLED) {
        std::fprintf(stderr, "\n[cancelled by Ctrl-C: the graph in flight stopped %.1f ms after the signal]\n",
                     ctrl_c::ms_since());
    }
    std::fprintf(stderr, "[%d of %zu lines embedded (%d floats each), %.0f ms]\n", n_done, lines.size(), n_out,
                 common::now_ms() - t0);
    if (status == LLAMA_CANCEL_ERROR) {
        std::fprintf(stderr, "error: %s\n", message);
        return 1;
    }
    if (!write_vectors(o.output, v, n_done, n_out, lines.size(), status == LLAMA_CANCEL_CANCELLED)) {
        return 1;
    }
    return status == LLAMA_CANCEL_CANCELLED ? 130 : 0;
}
