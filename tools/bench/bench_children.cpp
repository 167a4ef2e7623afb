// The bench's rows run in child processes (see bench_children.h).
#include "bench/bench_children.h"

#include "bench/bench_mtmd.h"
#include "bench/bench_tts.h"

#include "common/json_child.h"
#include "support.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

extern char ** environ;

namespace bench {

namespace {

// The delay the rpc-lan rows' proxies add each way (support.cpp reads the same variable).
std::string lan_delay_ms() {
    const char * v = std::getenv("LLAMA_CANCEL_RPC_DELAY_MS");
    return v != nullptr && *v != 0 ? v : "0.5";
}

// This process's environment for a child; for vulkan-1t with llvmpipe on one thread
// (LP_NUM_THREADS=1 in place of any value it has here).
std::vector<std::string> child_environment(const std::string & backend) {
    std::vector<std::string> env;
    const bool one_thread = backend == "vulkan-1t";
    for (char ** e = environ; *e != nullptr; ++e) {
        if (!one_thread || std::strncmp(*e, "LP_NUM_THREADS=", 15) != 0) {
            env.emplace_back(*e);
        }
    }
    if (one_thread) {
        env.emplace_back("LP_NUM_THREADS=1");
    }
    return env;
}

// Runs this executable again with `args`, for vulkan-1t with llvmpipe on one thread. Returns the
// exit code (127 when it cannot be started, -1 when this executable's path cannot be read).
int run_self(const std::vector<std::string> & args, const std::string & backend) {
    std::vector<std::string> argv = {common::executable_path()};
    if (argv[0].empty()) {
        return -1;
    }
    argv.insert(argv.end(), args.begin(), args.end());
    return common::run_command(argv, child_environment(backend));
}

// A child's row: how it is named in the table and the JSON.
struct child_row_label {
    const char * key;   // "backend", "kind", "arch"
    std::string  name;
    int          width; // of the table's first column
};

// Reads the object the child wrote into `tmp` and adds it to `out`; a child that wrote none (it
// failed: exit `rc`, its messages above) gets a "skipped" table line and an error entry instead.
// The object read (null for an error entry), for the section's targets: a row meets them only
// when its child also exited with 0.
common::child_json add_child_row(section & out, const std::string & tmp, int rc, const child_row_label & l) {
    common::child_json j = common::take_child_json(tmp);
    if (j.ok()) {
        out.json.push_back(j.doc);
    } else {
        std::printf("| %-*s | skipped: the row failed (exit %d), see the messages above |\n", l.width, l.name.c_str(),
                    rc);
        out.json.push_back({{l.key, l.name}, {"error", "exit " + std::to_string(rc)}});
    }
    return j;
}

// The hook's and the stateless callback's targets of a backend or multimodal row (`latency_target`,
// the stateless callback's the same with "stateless_" in front) folded into `out`.
void fold_hook_targets(section & out, const common::child_json & j, int rc, const char * latency_target) {
    const std::string stateless = std::string("stateless_") + latency_target;
    out.ok = out.ok && rc == 0 && j.is_true({"targets", latency_target}) && j.is_true({"targets", "overhead_le_3pct"});
    out.stateless_ok = out.stateless_ok && rc == 0 && j.is_true({"targets", stateless.c_str()}) &&
                       j.is_true({"targets", "stateless_overhead_le_3pct"});
}

// A fresh file name for a child's JSON, beside the bench's own.
std::string child_json_path(const options & opt, const std::string & row) {
    const std::string tmp = opt.json + "." + row + ".tmp";
    std::remove(tmp.c_str());
    return tmp;
}

void print_backend_header() {
    std::printf("\nbackends: upstream's abort callback alone, llama-cancel's hook (llama_cancel_decode) and the "
                "stateless eval callback by name (beside the abort callback), byte stored at a random 30-66%% "
                "point; latency over the runs the store reached before the decode returned, %% of the abort "
                "callback's p50; overhead with the byte at 0 (median paired ratio, and the pairs' range); the "
                "hook's interval in force and a checkpoint's measured round trip, ms (rpc-lan, rpc2-lan: "
                "servers behind a %s ms delay each way)\n\n", lan_delay_ms().c_str());
    std::printf("| backend   | method         | batch | threads | decode ms |   p50 ms |   p95 ms |   max ms "
                "| %% of abort | overhead (min..max)    | checkpoints | interval (rt) | stopped   | finished first "
                "| thread CPU ms | of wall | process CPU ms |\n");
    std::printf("|:----------|:---------------|------:|--------:|----------:|---------:|---------:|---------:"
                "|-----------:|-----------------------:|------------:|--------------:|----------:|---------------:"
                "|--------------:|--------:|---------------:|\n");
    std::fflush(stdout);
}

void print_memory_header(const options & opt) {
    std::printf("\nmemory kinds (CPU, %d threads): a prefill after 64 tokens in n_ubatch slices (batch/n_ubatch "
                "256/64; the real-proportion models :real %d/%d), then %d single-token decodes; "
                "llama_cancel_decode with the byte at 0 against plain llama_decode, median paired ratio [min, max] "
                "of %d pairs: with the hook bound (snapshots copied into its buffer, kept across calls), with the hook "
                "on a context with a spare sequence id (n_seq_max 2, kv_unified: snapshots share the state cell, "
                "no host copy), without a hook (a fresh buffer per call); snaps = snapshots per prefill / of them shared "
                "with the spare sequence, as the hooks counted them; ms/snap = their mean copy time; snap share = the "
                "copies' time over the prefill; held = token steps run to their end without a snapshot, per token; "
                "stops stored at a random "
                "10-90%% point, p50 / max ms store to return, runs that finished first (and prefills whose store came "
                "after their last checkpoint: late) counted apart\n\n",
                k_row_threads, k_real_batch, k_real_ubatch, 32, opt.runs);
    std::printf("| arch          | memory    | state bytes | snaps | ms/snap | restore | prefill ms | snap share "
                "| prefill overhead (hook)  | (hook, spare sequence)   | (no hook)                | token ms | held "
                "| token overhead           | prefill stop p50 / max         | token stop p50 / max          "
                "| committed | exact |\n");
    std::printf("|:--------------|:----------|------------:|------:|--------:|--------:|-----------:|-----------:"
                "|:-------------------------|:-------------------------|:-------------------------|---------:|-----:"
                "|:-------------------------|:-------------------------------|:------------------------------"
                "|----------:|:------|\n");
    std::fflush(stdout);
}

#ifdef LLAMA_CANCEL_HAVE_MTMD
void print_mtmd_header() {
    std::printf("\nmultimodal (mtmd, CPU): byte stored at a random 30-66%% point of the clip encode (through "
                "the hook, or the stateless eval callback by name) or of the embedding decode; without = a host "
                "polling between native calls; latency over the runs the store reached before the return, %% "
                "of the full encode or decode; overhead with the byte at 0 (median paired ratio)\n\n");
    std::printf("| kind   | path              | tokens |   full ms | without p50 ms |   p50 ms |   p95 ms "
                "|   max ms |    %% of full | overhead  | stopped   | finished first (ours/without) |\n");
    std::printf("|:-------|:------------------|-------:|----------:|---------------:|---------:|---------:"
                "|---------:|-------------:|----------:|----------:|------------------------------:|\n");
    std::fflush(stdout);
}

double      number_at(const common::json & j, std::initializer_list<const char *> path);
std::string ms2(double v);

using bench_mtmd::is_eval_kind;
using bench_mtmd::k_eval_repeats;

// The evaluation rows' runs (each run is three whole evaluations of a 20 s clip or of two images).
constexpr int k_eval_runs_max = 6;

// One multimodal row in its own process (bench-mtmd KIND), its projector generated once beside its
// text model (the small preset; internvl-batch: InternVL's projector, whose tiles batch): the bench's
// model, or for qwen3a a generated qwen3vl one without deepstack inputs (Qwen3-ASR's shape: the
// encoder's output is n_embd wide).
int run_mtmd_row(const options & opt, int n_embd, const std::string & row, const std::string & tmp) {
    const std::string kind    = bench_mtmd::row_kind(row);
    const std::string backend = bench_mtmd::row_backend(row);
    std::string model = opt.model;
    int rc = 0;
    if (kind == "qwen3a") {
        model = common::models_cache_dir() + "bench-qwen3asr.gguf";
        rc = common::ensure_model(common::script_path("make_model.py"), model, "bench", "qwen3vl", {"--deepstack", "0"})
                 ? 0 : 1;
        common::model_ptr m = rc == 0 ? common::load_model(model) : nullptr;
        rc = m ? 0 : 1;
        n_embd = m ? llama_model_n_embd(m.get()) : n_embd;
    }
    // The whisper rows' encoder 12 layers deep, not the preset's 3: attention over whisper's 1500
    // positions is one node a layer, which no checkpoint splits, and with 3 layers each was 8% of
    // the evaluation (whisper-large-v3's, 32 layers of width 1280: 0.25%). 12 gives 3.4%.
    const bool        whisper = kind == "voxtral" || kind == "glma";
    const std::string dir     = model.substr(0, model.find_last_of('/') + 1);
    // The video row's frames go through the vision row's projector: one file for both.
    const std::string projector = kind == "video" ? "vision" : kind;
    const std::string mmproj    = dir + "mmproj-" + projector + (whisper ? "-small-l12-" : "-small-") +
                                  std::to_string(n_embd) + ".gguf";
    if (rc == 0 && !common::in_cache_and_current(mmproj, common::script_path("make_mmproj.py"))) {
        const bool image = projector == "vision" || projector == "internvl-batch";
        std::vector<std::string> cmd = {"python3", common::script_path("make_mmproj.py"), mmproj, "--kind",
                                        image ? "vision" : "audio", "--preset", "small", "--n-embd-text",
                                        std::to_string(n_embd)};
        if (kind == "qwen3a") {
            cmd.insert(cmd.end(), {"--projector", "qwen3a"});
        } else if (kind == "voxtral") {
            cmd.insert(cmd.end(), {"--projector", "voxtral", "--stack", "10"});
        } else if (kind == "glma") {
            cmd.insert(cmd.end(), {"--projector", "glma"});
        } else if (kind == "internvl-batch") {
            cmd.insert(cmd.end(), {"--vision-projector", "internvl"});
        }
        if (whisper) {
            cmd.insert(cmd.end(), {"--n-layer", "12"});
        }
        rc = common::run_command(cmd);
    }
    // The video row's clip (bench_mtmd.h's size, rate and length), made once by ffmpeg.
    using bench_mtmd::k_video_fps, bench_mtmd::k_video_seconds, bench_mtmd::k_video_side;
    const std::string side  = std::to_string(k_video_side) + "x" + std::to_string(k_video_side);
    const std::string video = dir + "bench-video-" + side + "-" + std::to_string(k_video_fps) + "fps-" +
                              std::to_string(k_video_seconds) + "s.mp4";
    if (rc == 0 && kind == "video" && !common::in_cache_and_current(video, common::script_path("make_video.py"))) {
        rc = common::run_command({"python3", common::script_path("make_video.py"), video, "--size", side, "--fps",
                                  std::to_string(k_video_fps), "--duration", std::to_string(k_video_seconds)});
    }
    if (rc == 0) {
        std::vector<std::string> args = {"bench-mtmd", kind, "--model", model, "--mmproj", mmproj, "--seed",
                                         std::to_string(opt.seed), "--json", tmp};
        if (kind == "video") {
            args.insert(args.end(), {"--video", video});
        }
        if (is_eval_kind(kind)) {
            args.insert(args.end(), {"--runs", std::to_string(std::min(opt.runs, k_eval_runs_max)), "--repeats",
                                     std::to_string(k_eval_repeats), "--backend", backend, "--no-header"});
            if (!opt.all) {
                args.insert(args.end(), {"--repeat-for", "0"}); // the headline: the repeats, no more
            }
        } else {
            args.insert(args.end(), {"--runs", std::to_string(opt.runs)});
        }
        rc = run_self(args, backend);
    }
    return rc;
}

// One evaluation row's targets, each with its figures (under the table).
void print_eval_targets(const common::json & q) {
    const std::string backend = q.value("backend", std::string("cpu"));
    const std::string kind    = q.value("kind", std::string("?")) + (backend == "cpu" ? "" : ":" + backend);
    if (q.contains("error")) {
        std::printf("  %s: the row failed, nothing measured\n", kind.c_str());
        return;
    }
    const char * ways[][3] = {{"hook", "eval_stop_hook_ms", "eval_hook_overhead_pct"},
                              {"stateless callback", "eval_stop_stateless_ms", "eval_stateless_overhead_pct"}};
    const char * keys[][2] = {{"worst_stop_le_target", "overhead_le_2pct"},
                              {"stateless_worst_stop_le_target", "stateless_overhead_le_2pct"}};
    const std::string worst_pct = ms2(number_at(q, {"targets", "worst_stop_target_pct"}));
    const char * node_keys[] = {"worst_stop_le_interval_plus_longest_node", "stateless_worst_stop_le_interval_plus_longest_node"};
    for (int w = 0; w < 2; ++w) {
        std::printf("  %s, %s: worst stop %s%% of the evaluation <= %s%%: %s; byte at 0 %s%% <= 2%%: %s (today's worst "
                    "stop %s%%); worst stop %s ms <= interval + longest node (%s, %s ms, %s%% of the evaluation) + 2 ms: %s\n",
                    kind.c_str(), ways[w][0], ms2(number_at(q, {ways[w][1], "max_pct_of_eval"})).c_str(), worst_pct.c_str(),
                    q["targets"].value(keys[w][0], false) ? "met" : "MISSED", ms2(number_at(q, {ways[w][2]})).c_str(),
                    q["targets"].value(keys[w][1], false) ? "met" : "MISSED",
                    ms2(number_at(q, {"eval_stop_today_ms", "max_pct_of_eval"})).c_str(),
                    ms2(number_at(q, {ways[w][1], "max"})).c_str(), q.value("longest_node_op", std::string("?")).c_str(),
                    ms2(number_at(q, {"longest_node_ms"})).c_str(), ms2(number_at(q, {"longest_node_pct_of_eval"})).c_str(),
                    q["targets"].value(node_keys[w], false) ? "met" : "MISSED");
    }
}
#endif

// A number of a child's object at `path`, NaN where there is none (a failed row, a null figure).
double number_at(const common::json & j, std::initializer_list<const char *> path) {
    const common::json * at = &j;
    for (const char * key : path) {
        if (!at->is_object() || !at->contains(key)) {
            return NAN;
        }
        at = &(*at)[key];
    }
    return at->is_number() ? at->get<double>() : NAN;
}

const char * met(bool ok) {
    return ok ? "met" : "MISSED";
}

// "%.2f" of `v`, "-" where there is no figure.
std::string ms2(double v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.2f", v);
    return std::isnan(v) ? "-" : buf;
}

// One per-sequence row's three targets, each with the figures it compares (under the table).
void print_seq_targets(const common::json & q) {
    const std::string rule  = q.value("survivor_logits_rule", std::string("?"));
    const bool        exact = rule == "bit-identical";
    std::printf("  %s, n_ubatch %d: survivors' extra time p50 %s ms <= ubatch in flight %s + 5%% of plain %s = %s ms: "
                "%s\n",
                q.value("backend", std::string("?")).c_str(), q.value("n_ubatch", 0),
                ms2(number_at(q, {"single", "extra_ms", "p50"})).c_str(), ms2(number_at(q, {"ubatch_ms"})).c_str(),
                ms2(0.05 * number_at(q, {"plain_ms"})).c_str(), ms2(number_at(q, {"extra_target_ms"})).c_str(),
                met(q.value("extra_le_ubatch_plus_5pct", false)));
    std::printf("    cancelled sequence's drop p50 %s ms <= one sequence's stop p95 %s ms (the drop: the first of "
                "two observers to see it, a thread polling every 0.2 ms, p50 %s, and the decoding thread at its next "
                "graph, p50 %s): %s\n",
                ms2(number_at(q, {"seq_stop", "p50"})).c_str(), ms2(number_at(q, {"solo", "p95"})).c_str(),
                ms2(number_at(q, {"seq_stop_polling_thread", "p50"})).c_str(),
                ms2(number_at(q, {"seq_stop_decoding_thread", "p50"})).c_str(), met(q.value("stop_within_single", false)));
    std::printf("    survivors' logits %s (%s): %d of %d differ, max abs diff %.2g: %s\n", rule.c_str(),
                exact                          ? "one ubatch on the CPU"
                : q.value("n_ubatch", 0) < 512 ? "their rest goes in ubatches of other shapes"
                                               : "off the CPU",
                static_cast<int>(number_at(q, {"single", "logits_mismatches"})),
                static_cast<int>(number_at(q, {"single", "logits_compared"})),
                number_at(q, {"single", "logits_max_abs_diff"}), met(q.value("survivor_logits_ok", false)));
}

} // namespace

section backend_rows(const options & opt) {
    section out;
    if (opt.backends.empty()) {
        return out;
    }
    out.ran = true;
    print_backend_header();
    for (const std::string & name : opt.backends) {
        const std::string tmp = child_json_path(opt, name);
        const int rc = run_self({"bench-backend", name, "--model", opt.model, "--runs", std::to_string(opt.runs),
                                 "--batch", std::to_string(opt.backend_batch), "--threads", std::to_string(k_row_threads), "--seed",
                                 std::to_string(opt.seed), "--json", tmp},
                                name);
        fold_hook_targets(out, add_child_row(out, tmp, rc, {"backend", name, 9}), rc, "latency_le_10pct_of_abort");
    }
    std::printf("\ntargets (backends): p50 <= 10%% of the abort callback's, overhead <= 3%%: hook %s, "
                "stateless %s\n",
                out.ok ? "met" : "MISSED (see rows)", out.stateless_ok ? "met" : "MISSED (see rows)");
    return out;
}

section mtmd_rows(const options & opt, const llama_model * model) {
    section out;
#ifdef LLAMA_CANCEL_HAVE_MTMD
    if (opt.mtmd.empty()) {
        return out;
    }
    out.ran = true;
    // The encode rows (vision, audio) in one table, then the evaluation rows (qwen3a, voxtral, glma,
    // internvl-batch).
    bool encodes = false, evals = false;
    for (const bool eval : {false, true}) {
        for (const std::string & kind : opt.mtmd) {
            if (is_eval_kind(bench_mtmd::row_kind(kind)) != eval) {
                continue;
            }
            if (!eval && !encodes) {
                print_mtmd_header();
            }
            if (eval && !evals) {
                bench_mtmd::print_eval_header(bench_mtmd::k_eval_seconds, k_eval_repeats);
            }
            (eval ? evals : encodes) = true;
            const std::string tmp = child_json_path(opt, "mtmd-" + bench_mtmd::row_kind(kind) + "-" + bench_mtmd::row_backend(kind));
            const int rc = run_mtmd_row(opt, llama_model_n_embd(model), kind, tmp);
            const common::child_json j = add_child_row(out, tmp, rc, {"kind", kind, 7});
            if (eval) {
                out.ok = out.ok && rc == 0 && j.is_true({"targets", "worst_stop_le_target"}) &&
                         j.is_true({"targets", "overhead_le_2pct"});
                out.stateless_ok = out.stateless_ok && rc == 0 &&
                                   j.is_true({"targets", "stateless_worst_stop_le_target"}) &&
                                   j.is_true({"targets", "stateless_overhead_le_2pct"});
            } else {
                fold_hook_targets(out, j, rc, "latency_le_10pct_of_encode");
            }
        }
    }
    std::printf("\n");
    if (encodes) {
        std::printf("targets (mtmd encodes): encode cancel p50 <= 10%% of the encode, overhead <= 3%%\n");
    }
    if (evals) {
        std::printf("targets (mtmd evaluations), each row: worst stop <= 5%% of the evaluation (CPU; 10%% on Vulkan), byte at 0 <= 2%%; and the "
                    "bound checkpoints keep: worst stop <= the interval (10 ms) + the evaluation's longest node + 2 ms\n");
        for (const common::json & q : out.json) {
            if (is_eval_kind(bench_mtmd::row_kind(q.value("kind", std::string())))) {
                print_eval_targets(q);
            }
        }
    }
    std::printf("targets (mtmd): hook %s, stateless %s\n", out.ok ? "met" : "MISSED (see rows)",
                out.stateless_ok ? "met" : "MISSED (see rows)");
#else
    (void) opt;
    (void) model;
#endif
    return out;
}

#ifdef LLAMA_CANCEL_HAVE_MTMD
namespace {

// One text-to-speech row in its own process (bench-tts PIPELINE --backend B), on the pair PAIR names
// (bench_tts::pair_preset), generated into the model cache (scripts/make_tts.py --preset P).
int run_tts_row(const options & opt, const std::string & pair, const std::string & backend, const std::string & tmp) {
    const std::string pipeline = bench_tts::pair_pipeline(pair);
    const std::string preset   = bench_tts::pair_preset(pair);
    const std::string dir      = common::models_cache_dir();
    const std::string model    = dir + "tts-" + pipeline + "-" + preset + ".gguf";
    const std::string mmproj   = dir + "mmproj-" + pipeline + "-" + preset + ".gguf";
    int rc = 0;
    const std::string script = common::script_path("make_tts.py");
    if (!common::in_cache_and_current(model, script) || !common::in_cache_and_current(mmproj, script)) {
        std::fprintf(stderr, "generating the %s %s pair in %s\n", pipeline.c_str(), preset.c_str(), dir.c_str());
        rc = common::run_command({"python3", script, "--pipeline", pipeline, "--model", model,
                                  "--mmproj", mmproj, "--preset", preset});
    }
    if (rc == 0) {
        rc = run_self({"bench-tts", pipeline, "--backend", backend, "--model", model, "--mmproj", mmproj, "--runs",
                       std::to_string(std::min(opt.runs, bench_tts::k_runs_max)), "--repeats",
                       std::to_string(bench_tts::k_repeats), "--threads", std::to_string(bench_tts::k_threads), "--seed",
                       std::to_string(opt.seed), "--json", tmp, "--no-header"},
                      backend);
    }
    return rc;
}

// One row's targets, each way, with the figures they compare (under the table).
void print_tts_targets(const common::json & q) {
    const std::string row = q.value("row", std::string("?"));
    if (q.contains("error")) {
        std::printf("  %s: the row failed, nothing measured\n", row.c_str());
        return;
    }
    const char * ways[][2] = {{"hook", ""}, {"stateless callbacks", "stateless_"}};
    const char * keys[]    = {"frame_hook_overhead_pct", "frame_stateless_overhead_pct"};
    for (int w = 0; w < 2; ++w) {
        const std::string pre = ways[w][1];
        const std::string way = w == 0 ? "hook" : "stateless";
        std::string worst;
        for (const char * step : {"gen_code", "frame_decode", "gen_wav"}) {
            worst += (worst.empty() ? "" : ", ") + std::string(step) + " " +
                     ms2(number_at(q, {"steps", step, way.c_str(), "max"})) + " ms (" +
                     ms2(number_at(q, {"steps", step, way.c_str(), "max_pct_of_call"})) + "%, today " +
                     ms2(number_at(q, {"steps", step, "today", "max"})) + " ms)";
        }
        std::printf("  %s, %s: every stop of a call >= 100 ms CANCELLED: %s; worst stops %s within 10%% of the call (10 ms under 100 ms): "
                    "%s; byte at 0 %s%% a frame <= 2%%: %s\n",
                    row.c_str(), ways[w][0], met(q["targets"].value(pre + "every_stop_cancelled", false)), worst.c_str(),
                    met(q["targets"].value(pre + "stop_within_10pct_or_10ms", false)), ms2(number_at(q, {keys[w]})).c_str(),
                    met(q["targets"].value(pre + "overhead_le_2pct", false)));
    }
}

} // namespace
#endif

section tts_rows(const options & opt) {
    section out;
#ifdef LLAMA_CANCEL_HAVE_MTMD
    if (opt.tts.empty()) {
        return out;
    }
    out.ran = true;
    bench_tts::print_header(bench_tts::k_repeats);
    for (const std::string & name : opt.tts) {
        const size_t colon = name.find(':');
        const std::string pair    = name.substr(0, colon);
        const std::string backend = colon == std::string::npos ? "cpu" : name.substr(colon + 1);
        const std::string tmp     = child_json_path(opt, "tts-" + pair + "-" + backend);
        const int rc = run_tts_row(opt, pair, backend, tmp);
        const common::child_json j = add_child_row(out, tmp, rc, {"row", name, 16});
        for (const char * pre : {"", "stateless_"}) {
            const std::string p  = pre;
            const bool        ok = rc == 0 && j.is_true({"targets", (p + "every_stop_cancelled").c_str()}) &&
                            j.is_true({"targets", (p + "stop_within_10pct_or_10ms").c_str()}) &&
                            j.is_true({"targets", (p + "overhead_le_2pct").c_str()});
            (p.empty() ? out.ok : out.stateless_ok) = (p.empty() ? out.ok : out.stateless_ok) && ok;
        }
    }
    std::printf("\ntargets (text to speech), each row: every stop of a call >= 100 ms CANCELLED, within 10%% of its call (10 ms under 100 "
                "ms), byte at 0 <= 2%% a frame\n");
    for (const common::json & q : out.json) {
        print_tts_targets(q);
    }
    std::printf("targets (text to speech): hook %s, stateless %s\n", out.ok ? "met" : "MISSED (see rows)",
                out.stateless_ok ? "met" : "MISSED (see rows)");
#else
    (void) opt;
#endif
    return out;
}

section memory_rows(const options & opt) {
    section out;
    if (opt.archs.empty()) {
        return out;
    }
    out.ran = true;
    print_memory_header(opt);
    for (const std::string & entry : opt.archs) {
        // ARCH, or ARCH:PRESET for a make_model.py preset other than --arch-preset (mamba2:real).
        const size_t colon = entry.find(':');
        const std::string arch   = entry.substr(0, colon);
        const std::string preset = colon == std::string::npos ? opt.arch_preset : entry.substr(colon + 1);
        const bool        real   = preset == "real";
        const std::string tmp    = child_json_path(opt, "memory-" + arch + "-" + preset);
        const std::string model  = common::models_cache_dir() + preset + (arch == "llama" ? "" : "-" + arch) + ".gguf";
        int rc = common::ensure_model(common::script_path("make_model.py"), model, preset, arch) ? 0 : 1;
        if (rc == 0) {
            std::vector<std::string> args = {"bench-memory", "--model", model, "--runs", std::to_string(std::max(opt.runs, 3)),
                                             "--threads", std::to_string(k_row_threads), "--json", tmp};
            if (real) {
                args.insert(args.end(), {"--batch", std::to_string(k_real_batch), "--ubatch", std::to_string(k_real_ubatch)});
            }
            rc = run_self(args, "");
        }
        const common::child_json j = add_child_row(out, tmp, rc, {"arch", real ? arch + ":real" : arch, 7});
        out.ok = out.ok && rc == 0 && j.is_true({"rollback_exact"});
    }
    std::printf("\ntargets (memory kinds): rollback exact on every row: %s\n", out.ok ? "met" : "MISSED (see rows)");
    return out;
}

// Per-sequence cancel rows (bench-seq), one child process per backend and ubatch size: e.g. the batch
// as one ubatch (512), and as four (128: a stop then keeps the finished ones).
section seq_rows(const options & opt) {
    section out;
    if (opt.seq_backends.empty()) {
        return out;
    }
    out.ran = true;
    std::string ubatches;
    for (const int u : opt.seq_ubatches) {
        ubatches += (ubatches.empty() ? "" : ", ") + std::to_string(u);
    }
    std::printf("\nper-sequence cancel (4 sequences x 128 tokens in one batch, n_ubatch %s, %d runs): one "
                "sequence's byte stored at a random 20-80%% point: its stop (store to the sequence's entry seen set, by "
                "the first of two observers: a thread polling it every 0.2 ms, the decoding thread at its next graph) "
                "beside one sequence alone (store to return), the survivors' extra time against the batch without a "
                "cancel and their logits against its; all four stored at once: store to return; runs that finished "
                "before the store counted apart\n\n", ubatches.c_str(), opt.runs);
    std::fflush(stdout);
    bool header = true; // the first row that runs prints the table's header
    for (const std::string & name : opt.seq_backends) {
        for (const int n_ubatch : opt.seq_ubatches) {
            const std::string tmp = child_json_path(opt, "seq-" + name + "-" + std::to_string(n_ubatch));
            std::vector<std::string> args = {"bench-seq", "--model", opt.model, "--backend", name, "--runs",
                                             std::to_string(opt.runs), "--seed", std::to_string(opt.seed),
                                             "--n-ubatch", std::to_string(n_ubatch), "--json", tmp};
            if (!header) {
                args.push_back("--no-header");
            }
            const int rc = run_self(args, name);
            const common::child_json j = add_child_row(out, tmp, rc, {"backend", name, 0});
            if (!j.ok()) {
                out.json.back()["n_ubatch"] = n_ubatch; // the error entry says which row
            }
            header = header && !j.ok();
            out.ok = out.ok && rc == 0 && j.is_true({"extra_le_ubatch_plus_5pct"}) && j.is_true({"stop_within_single"}) &&
                     j.is_true({"survivor_logits_ok"});
        }
    }
    std::printf("\ntargets (per-sequence), each row:\n");
    for (const common::json & q : out.json) {
        if (q.contains("error")) {
            std::printf("  %s, n_ubatch %d: the row failed, nothing measured\n", q.value("backend", std::string("?")).c_str(),
                        q.value("n_ubatch", 0));
        } else {
            print_seq_targets(q);
        }
    }
    std::printf("targets (per-sequence): %s\n", out.ok ? "met" : "MISSED (see rows)");
    return out;
}

section plans_rows(const options & opt) {
    section out;
    if (opt.plans.empty()) {
        return out;
    }
    out.ran = true;
    std::printf("\nplan stability (issue 47): a token loop (200 single tokens after 32) and 20 prefills of one shape "
                "from an empty memory, each way on its own context: the hook through llama_cancel_decode, the "
                "stateless name alone through llama_decode (no abort callback); checkpoints per call, and the calls "
                "whose views (a checkpoint at a split's last node ends none) differ from the call before's, after the first two (ggml-cuda "
                "captures a view's CUDA graph after two unchanged calls); byte at 0: each call against plain llama_decode "
                "with no callback, the ways taking turns, median of the paired ratios; on Vulkan prefills of 128 tokens\n\n");
    std::printf("| setup     | way       | workload    | calls | call ms  | byte at 0 | cp/call | moved     |\n");
    std::printf("|:----------|:----------|:------------|------:|---------:|----------:|--------:|:----------|\n");
    std::fflush(stdout);
    for (const std::string & name : opt.plans) {
        const std::string tmp = child_json_path(opt, "plans-" + name);
        std::vector<std::string> args = {"bench-plans", name, "--model", opt.model, "--threads",
                                         std::to_string(k_row_threads), "--seed", std::to_string(opt.seed), "--json", tmp};
        if (common::is_vulkan_setup(name)) {
            args.insert(args.end(), {"--prompt", "128"}); // llvmpipe: a 256-token prefill takes 5 s
        }
        const int rc = run_self(args, name);
        const common::child_json j = add_child_row(out, tmp, rc, {"setup", name, 9});
        out.ok = out.ok && rc == 0 && j.is_true({"targets", "no_changes_after_two"});
    }
    std::printf("\ntargets (plans): no call's views moved after the first two: %s\n", out.ok ? "met" : "MISSED (see rows)");
    return out;
}

section embed_rows(const options & opt) {
    section out;
    if (opt.embed.empty()) {
        return out;
    }
    out.ran = true;
    const std::string model = common::models_cache_dir() + "tiny-bert.gguf";
    std::printf("\nembeddings (issue 48): an indexing job of 2,048 passages (8-40 tokens), 64 to a call on a generated "
                "BERT, three ways: llama_cancel_embed with a hook, llama_cancel_embed with the stateless name as cb_eval, "
                "and llama.cpp's idiom (llama_encode, llama_get_embeddings_seq) with the byte read between calls; byte "
                "at 0: each call against the idiom's, the ways taking turns, median of the paired ratios; stops: the "
                "byte stored at a random 10-90%% of the job, store to return, also as %% of one call\n\n");
    std::printf("| setup     | way           | call ms  | byte at 0 | job ms   | stopped | p50 ms   | max ms   | p50 %%  | max %%  |\n");
    std::printf("|:----------|:--------------|---------:|----------:|---------:|--------:|---------:|---------:|-------:|-------:|\n");
    std::fflush(stdout);
    if (!common::ensure_model(common::script_path("make_model.py"), model, "tiny", "bert")) {
        out.ok = false;
        return out;
    }
    for (const std::string & name : opt.embed) {
        const std::string tmp = child_json_path(opt, "embed-" + name);
        const std::vector<std::string> args = {"bench-embed", name, "--model", model, "--threads",
                                               std::to_string(k_row_threads), "--seed", std::to_string(opt.seed),
                                               "--runs", std::to_string(opt.runs), "--json", tmp};
        const int rc = run_self(args, name);
        const common::child_json j = add_child_row(out, tmp, rc, {"setup", name, 9});
        out.ok = out.ok && rc == 0 && j.is_true({"targets", "stop_p50_le_10pct_of_call"}) &&
                 j.is_true({"targets", "byte_at_0_le_1pct"});
    }
    std::printf("\ntargets (embeddings): a stop's p50 within 10%% of a call, the byte at 0 within 1%%, both "
                "llama-cancel ways: %s\n", out.ok ? "met" : "MISSED (see rows)");
    return out;
}

} // namespace bench
