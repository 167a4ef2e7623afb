// The prompt rows of a text-to-speech generation: see tts_prompt.h.
#include "tts/tts_prompt.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <utility>

// llama.cpp's extension API (its src/llama-ext.h, which libllama exports for libmtmd's audio
// helper; not in llama.h): the token embedding matrix as F32, n_vocab rows of n_embd; with `out`
// NULL, the number of floats. C++ linkage, as libllama defines it.
LLAMA_API uint32_t llama_model_get_tok_embd(const struct llama_model * model, float * out);

namespace llama_cancel {
namespace {

// The codec language names of the ISO codes llama-tts takes (--tts-lang).
const char * language_name(const std::string & lang) {
    static const char * const codes[][2] = {
        {"zh", "chinese"}, {"en", "english"}, {"de", "german"},   {"it", "italian"}, {"pt", "portuguese"},
        {"es", "spanish"}, {"ja", "japanese"}, {"ko", "korean"},  {"fr", "french"},  {"ru", "russian"},
    };
    for (const auto & c : codes) {
        if (lang == c[0]) {
            return c[1];
        }
    }
    return nullptr;
}

llama_token find_piece(const llama_vocab * vocab, const std::string & piece) {
    const int32_t n = llama_vocab_n_tokens(vocab);
    for (llama_token t = 0; t < n; ++t) {
        const char * text = llama_vocab_get_text(vocab, t);
        if (text != nullptr && piece == text) {
            return t;
        }
    }
    return LLAMA_TOKEN_NULL;
}

std::vector<llama_token> tokenize(const llama_vocab * vocab, const std::string & text, bool parse_special) {
    std::vector<llama_token> ids(text.size() + 16);
    int32_t n = llama_tokenize(vocab, text.c_str(), static_cast<int32_t>(text.size()), ids.data(),
                               static_cast<int32_t>(ids.size()), false, parse_special);
    if (n < 0) {
        ids.resize(static_cast<size_t>(-n));
        n = llama_tokenize(vocab, text.c_str(), static_cast<int32_t>(text.size()), ids.data(),
                           static_cast<int32_t>(ids.size()), false, parse_special);
    }
    ids.resize(n > 0 ? static_cast<size_t>(n) : 0);
    return ids;
}

// Token rows of the whole vocabulary, read once per prompt and dropped with it.
class token_rows {
  public:
    bool load(const llama_model * model, int32_t n_embd) {
        n_embd_ = n_embd;
        const uint32_t n = llama_model_get_tok_embd(model, nullptr);
        if (n == 0 || n_embd <= 0 || n % static_cast<uint32_t>(n_embd) != 0) {
            return false;
        }
        rows_.resize(n);
        return llama_model_get_tok_embd(model, rows_.data()) == n;
    }
    bool has(llama_token t) const {
        return t >= 0 && static_cast<size_t>(t) < rows_.size() / static_cast<size_t>(n_embd_);
    }
    // Appends row a (+ row b when b is not LLAMA_TOKEN_NULL) to `dst`.
    void append(std::vector<float> & dst, llama_token a, llama_token b = LLAMA_TOKEN_NULL) const {
        const float * ra = rows_.data() + static_cast<size_t>(a) * n_embd_;
        const size_t  at = dst.size();
        dst.insert(dst.end(), ra, ra + n_embd_);
        if (b != LLAMA_TOKEN_NULL) {
            const float * rb = rows_.data() + static_cast<size_t>(b) * n_embd_;
            for (int32_t i = 0; i < n_embd_; ++i) {
                dst[at + i] += rb[i];
            }
        }
    }

  private:
    std::vector<float> rows_;
    int32_t            n_embd_ = 0;
};

bool qwen3_prompt(const llama_vocab * vocab, const token_rows & rows, const std::string & text, const char * lang,
                  tts_prompt & out, std::string & error) {
    const char * names[] = {"<|codec_0|>", "<|codec_bos|>", "<|codec_eos_token|>", "<|codec_pad|>",
                            "<|codec_think|>", "<|codec_think_bos|>", "<|codec_think_eos|>", "<tts_pad>",
                            "<tts_text_bos>", "<tts_text_eod>"};
    llama_token id[10];
    for (int i = 0; i < 10; ++i) {
        id[i] = find_piece(vocab, names[i]);
        if (!rows.has(id[i])) {
            error = std::string("the backbone's vocabulary lacks ") + names[i] + " (not a Qwen3-TTS talker?)";
            return false;
        }
    }
    const llama_token codec_bos = id[1], codec_pad = id[3], think = id[4], think_bos = id[5], think_eos = id[6],
                      tts_pad = id[7], tts_bos = id[8], tts_eod = id[9];
    std::string name = lang != nullptr && lang[0] != '\0' ? lang : "english";
    if (const char * full = language_name(name)) {
        name = full;
    }
    const llama_token language = find_piece(vocab, "<|codec_language_" + name + "|>");
    if (!rows.has(language)) {
        error = "unknown language \"" + name + "\" (no <|codec_language_" + name + "|> token)";
        return false;
    }
    // The chat wrap: its first 3 tokens are the role, the last 5 the closing and the next role.
    const std::vector<llama_token> ids =
        tokenize(vocab, "<|im_start|>assistant\n" + text + "<|im_end|>\n<|im_start|>assistant\n", true);
    if (ids.size() < 9) {
        error = "the text tokenizes to nothing";
        return false;
    }
    out.codec_0   = id[0];
    out.codec_eos = id[2];
    for (size_t i = 0; i < 3; ++i) {
        rows.append(out.head, ids[i]);
    }
    for (llama_token t : {think, think_bos, language, think_eos}) {
        rows.append(out.head, tts_pad, t);
    }
    rows.append(out.voice_base, tts_pad);
    rows.append(out.overlay, tts_pad);
    std::vector<float> tail;
    rows.append(tail, tts_bos, codec_pad);
    for (size_t i = 3; i + 5 < ids.size(); ++i) {
        rows.append(tail, ids[i], codec_pad);
    }
    rows.append(tail, tts_eod, codec_pad);
    rows.append(tail, tts_pad, codec_bos);
    out.chunks.push_back(std::move(tail));
    return true;
}

// The reference's text normalisation: line breaks to spaces, ';' to ',', trimmed, a capital first
// letter, a final '.' after a letter or digit.
std::string normalise(const std::string & in) {
    std::string s;
    for (char c : in) {
        s += c == '\n' || c == '\r' ? ' ' : c == ';' ? ',' : c;
    }
    const size_t b = s.find_first_not_of(' ');
    if (b == std::string::npos) {
        return "";
    }
    s = s.substr(b, s.find_last_not_of(' ') - b + 1);
    if (s[0] >= 'a' && s[0] <= 'z') {
        s[0] = static_cast<char>(s[0] - 'a' + 'A');
    }
    if (std::isalnum(static_cast<unsigned char>(s.back()))) {
        s += '.';
    }
    return s;
}

// Pieces after which a chunk may end: the tokens of `marks` past the tokenizer's leading one.
std::vector<llama_token> boundary_tokens(const llama_vocab * vocab, const char * marks) {
    std::vector<llama_token> ids = tokenize(vocab, marks, false);
    if (ids.size() <= 1) {
        return {};
    }
    return std::vector<llama_token>(ids.begin() + 1, ids.end());
}

// Cuts `ids` after every run of boundary tokens.
std::vector<std::vector<llama_token>> cut_after(const std::vector<llama_token> & ids,
                                                const std::vector<llama_token> & boundary) {
    std::vector<std::vector<llama_token>> out(1);
    bool after_boundary = false;
    for (llama_token t : ids) {
        const bool is_boundary = std::find(boundary.begin(), boundary.end(), t) != boundary.end();
        if (!is_boundary && after_boundary) {
            out.emplace_back();
        }
        out.back().push_back(t);
        after_boundary = is_boundary;
    }
    return out;
}

// Chunks of at most k_max tokens where punctuation allows: sentences, an oversized one cut at
// clauses, then neighbours merged while they fit.
std::vector<std::vector<llama_token>> split_text(const llama_vocab * vocab, const std::vector<llama_token> & ids) {
    constexpr size_t k_max = 50;
    if (ids.size() <= k_max) {
        return {ids};
    }
    std::vector<std::vector<llama_token>> pieces;
    for (auto & sentence : cut_after(ids, boundary_tokens(vocab, ".!...?"))) {
        auto clauses = sentence.size() > k_max ? cut_after(sentence, boundary_tokens(vocab, ",;:"))
                                               : std::vector<std::vector<llama_token>>{sentence};
        for (auto & c : clauses) {
            pieces.push_back(std::move(c));
        }
    }
    std::vector<std::vector<llama_token>> out;
    for (auto & p : pieces) {
        if (!out.empty() && out.back().size() + p.size() <= k_max) {
            out.back().insert(out.back().end(), p.begin(), p.end());
        } else if (!p.empty()) {
            out.push_back(std::move(p));
        }
    }
    return out;
}

bool pocket_prompt(const llama_vocab * vocab, const token_rows & rows, const std::string & text, bool with_voice,
                   tts_prompt & out, std::string & error) {
    const llama_token audio_bos = find_piece(vocab, "<|audio_bos|>");
    if (!rows.has(audio_bos)) {
        error = "the backbone's vocabulary lacks <|audio_bos|> (not a Pocket-TTS backbone?)";
        return false;
    }
    const std::vector<llama_token> ids = tokenize(vocab, normalise(text), false);
    if (ids.empty()) {
        error = "the text tokenizes to nothing";
        return false;
    }
    const llama_token bos_before_voice = find_piece(vocab, "<|bos_before_voice|>");
    if (with_voice && rows.has(bos_before_voice)) {
        rows.append(out.head, bos_before_voice);
    }
    for (const auto & chunk : split_text(vocab, ids)) {
        std::vector<float> r;
        for (llama_token t : chunk) {
            rows.append(r, t);
        }
        rows.append(r, audio_bos);
        out.chunks.push_back(std::move(r));
        out.chunk_tokens.push_back(static_cast<int32_t>(chunk.size()));
    }
    return true;
}

} // namespace

bool build_tts_prompt(const llama_model * model, tts_pipeline kind, const std::string & text, const char * lang,
                      bool with_voice, tts_prompt & out, std::string & error) {
    out        = tts_prompt{};
    out.kind   = kind;
    out.n_embd = llama_model_n_embd(model);
    token_rows rows;
    if (!rows.load(model, out.n_embd)) {
        error = "cannot read the backbone's token embeddings";
        return false;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    return kind == tts_pipeline::qwen3tts ? qwen3_prompt(vocab, rows, text, lang, out, error)
                                          : pocket_prompt(vocab, rows, text, with_voice, out, error);
}

} // namespace llama_cancel
