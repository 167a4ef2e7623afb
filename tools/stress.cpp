// `llama-cancel stress`: cancel/resume cycles at random graph nodes, through both hooks, and cancel
// storms from another thread; after each cancel the memory must hold exactly the committed ubatches,
// and every resumed prefill must end with logits bit-identical to an uninterrupted one.
#include "commands.h"
#include "support.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {


struct stress_options {
    std::string model;
    std::string backend    = "cpu";
    std::string rpc_server = LLAMA_CANCEL_RPC_SERVER;
    int         cycles  = 1000;
    int         storm_s = 2;
    int         n       = 256;
    int         ubatch  = 32;
    uint32_t    seed    = 1;
};

} // namespace

int stress_main(int argc, char ** argv) {
    stress_options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        const char * v = argv[i + 1];
        if (a == "--model") {
            o.model = v;
        } else if (a == "--backend") {
            o.backend = v;
        } else if (a == "--rpc-server") {
            o.rpc_server = v;
        } else if (a == "--cycles") {
            o.cycles = std::atoi(v);
        } else if (a == "--storm-seconds") {
            o.storm_s = std::atoi(v);
        } else if (a == "--seed") {
            o.seed = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
        } else {
            std::fprintf(stderr, "error: unknown option %s\n", a.c_str());
            return 2;
        }
    }
    if (o.model.empty() || o.cycles < 0 || o.storm_s < 0 || argc % 2 == 0) {
        std::fprintf(stderr, "usage: llama-cancel stress --model PATH [--backend cpu|blas|vulkan|rpc1|rpc2]\n"
                             "                           [--cycles 1000] [--storm-seconds 2] [--seed 1]\n");
        return 2;
    }
    lcs::quiet_logs();
    lcs::backend_setup setup;
    if (!lcs::setup_backend(o.backend, o.rpc_server, 1, setup)) {
        return 1;
    }
    lcs::model_ptr model = setup.load(o.model, -1);
    if (!model) {
        std::fprintf(stderr, "error: cannot load %s\n", o.model.c_str());
        return 1;
    }
    const auto prompt = lcs::make_prompt(model.get(), o.n, o.seed);

    lcs::node_trigger trig;
    int8_t  flag = 0;
    trig.flag = &flag;
    lcs::hook_ptr hook = lcs::make_hook(lcs::node_trigger::eval_cb, &trig);
    lcs::context_options opt;
    opt.n_ctx        = static_cast<uint32_t>(o.n);
    opt.n_batch      = static_cast<uint32_t>(o.n);
    opt.n_ubatch     = static_cast<uint32_t>(o.ubatch);
    opt.n_threads    = 1;
    opt.offload_kqv  = !setup.devices.empty();
    lcs::context_ptr plain = lcs::make_context(model.get(), opt);
    opt.cb_eval      = llama_cancel_hook_eval_callback;
    opt.cb_eval_data = hook.get();
    lcs::context_ptr hooked = lcs::make_context(model.get(), opt);
    if (!plain || !hooked) {
        std::fprintf(stderr, "error: cannot create contexts\n");
        return 1;
    }

    // Mode 0 stops through the abort callback (the trigger chained as the caller's), mode 1 through
    // the eval hook (the trigger chained behind it).
    auto params_for = [&](int mode) {
        llama_cancel_decode_params p = llama_cancel_decode_default_params();
        p.flag           = &flag;
        p.sliced_outputs = true; // logits are read by negative index: stops keep finished slices
        if (mode == 0) {
            p.abort_callback      = lcs::node_trigger::abort_cb;
            p.abort_callback_data = &trig;
        } else {
            p.hook = hook.get();
        }
        return p;
    };

    // Reference, and the number of trigger calls a whole prefill makes on each path.
    std::vector<float> want;
    int ticks[2] = {0, 0};
    for (int mode = 0; mode < 2; ++mode) {
        llama_context * ctx = mode == 0 ? plain.get() : hooked.get();
        trig.calls = 0;
        trig.at    = -1;
        const llama_cancel_decode_params p = params_for(mode);
        lcs::seq_batch b(prompt, 0, o.n, 0);
        if (llama_cancel_decode(ctx, b.get(), &p, nullptr, nullptr, 0) != LLAMA_CANCEL_OK) {
            std::fprintf(stderr, "error: reference decode failed\n");
            return 1;
        }
        ticks[mode] = trig.calls;
        const auto got = lcs::last_logits(ctx);
        if (mode == 0) {
            want = got;
        } else if (got != want) {
            std::fprintf(stderr, "FAIL: the hooked context's uninterrupted logits differ\n");
            return 1;
        }
    }

    std::mt19937 rng(o.seed);
    long cancels = 0, completions = 0, errors = 0;
    const double t0 = lcs::now_ms();
    for (int c = 0; c < o.cycles; ++c) {
        const int mode = c % 2; // alternate: abort callback, eval hook
        llama_context * ctx = mode == 0 ? plain.get() : hooked.get();
        llama_memory_clear(llama_get_memory(ctx), true);
        int committed = 0;
        // Cancel at a random point, resume from the committed position, until the prefill is whole.
        for (int attempt = 0; committed < o.n; ++attempt) {
            flag       = 0;
            trig.calls = 0;
            trig.at    = attempt < 3 ? std::uniform_int_distribution<int>(1, ticks[mode])(rng) : -1;
            const llama_cancel_decode_params p = params_for(mode);
            llama_cancel_decode_result r;
            lcs::seq_batch b(prompt, committed, o.n - committed, committed);
            const int32_t st = llama_cancel_decode(ctx, b.get(), &p, &r, nullptr, 0);
            const llama_pos pos_max = llama_memory_seq_pos_max(llama_get_memory(ctx), 0);
            if (st == LLAMA_CANCEL_ERROR) {
                std::fprintf(stderr, "FAIL cycle %d: error %s\n", c, r.message);
                ++errors;
                break;
            }
            committed += r.n_committed;
            if (pos_max != committed - 1 || (committed % o.ubatch != 0 && committed != o.n)) {
                std::fprintf(stderr, "FAIL cycle %d: memory ends at %d, committed %d (status %s)\n", c, pos_max,
                             committed, llama_cancel_status_str(st));
                ++errors;
                break;
            }
            cancels += st == LLAMA_CANCEL_CANCELLED;
        }
        if (committed == o.n) {
            ++completions;
            if (lcs::last_logits(ctx) != want) {
                std::fprintf(stderr, "FAIL cycle %d: resumed logits differ from the uninterrupted ones\n", c);
                ++errors;
            }
        }
        if ((c + 1) % 1000 == 0) {
            std::fprintf(stderr, "  %d cycles, %ld cancels, %ld errors\n", c + 1, cancels, errors);
        }
    }
    const double t_cycles = lcs::now_ms() - t0;

    // Cancel storm: another thread toggles the byte as fast as it can while decodes run.
    long storm_decodes = 0, storm_cancelled = 0;
    if (o.storm_s > 0) {
        std::atomic<bool> stop{false};
        std::atomic<long> toggles{0};
        std::thread storm([&] {
            // Thousands of set/reset pairs a second: the byte stays set a few microseconds each time.
            while (!stop.load(std::memory_order_relaxed)) {
                __atomic_store_n(&flag, 1, __ATOMIC_RELAXED);
                const double until = lcs::now_ms() + 0.005;
                while (lcs::now_ms() < until) {
                }
                __atomic_store_n(&flag, 0, __ATOMIC_RELAXED);
                toggles.fetch_add(1, std::memory_order_relaxed);
                std::this_thread::sleep_for(std::chrono::microseconds(100));
            }
        });
        const double end = lcs::now_ms() + o.storm_s * 1000.0;
        for (int k = 0; lcs::now_ms() < end; ++k) {
            llama_context * ctx = k % 2 == 0 ? plain.get() : hooked.get();
            llama_memory_clear(llama_get_memory(ctx), true);
            int committed = 0;
            for (int attempt = 0; committed < o.n && attempt < 10000; ++attempt) {
                trig.at = -1;
                llama_cancel_decode_params p = llama_cancel_decode_default_params();
                p.flag           = &flag;
                p.hook           = k % 2 == 0 ? nullptr : hook.get();
                p.sliced_outputs = true;
                llama_cancel_decode_result r;
                lcs::seq_batch b(prompt, committed, o.n - committed, committed);
                const int32_t st = llama_cancel_decode(ctx, b.get(), &p, &r, nullptr, 0);
                committed += r.n_committed;
                ++storm_decodes;
                storm_cancelled += st == LLAMA_CANCEL_CANCELLED;
                if (st == LLAMA_CANCEL_ERROR ||
                    llama_memory_seq_pos_max(llama_get_memory(ctx), 0) != committed - 1) {
                    std::fprintf(stderr, "FAIL storm: status %s, memory ends at %d, committed %d\n",
                                 llama_cancel_status_str(st), llama_memory_seq_pos_max(llama_get_memory(ctx), 0),
                                 committed);
                    ++errors;
                    break;
                }
            }
            if (committed == o.n && lcs::last_logits(ctx) != want) {
                std::fprintf(stderr, "FAIL storm: logits after resumes differ\n");
                ++errors;
            }
        }
        stop = true;
        storm.join();
        std::printf("storm: %ld byte toggles, %ld decodes, %ld cancelled, memory consistent after each\n",
                    toggles.load(), storm_decodes, storm_cancelled);
    }

    std::printf("stress on %s (%s): %d cycles (%ld cancels, %ld completed prefills) in %.1f s, %ld errors; final logits "
                "bit-identical to the uninterrupted prefill in every cycle: %s\n",
                o.backend.c_str(), setup.description.c_str(), o.cycles, cancels, completions, t_cycles / 1000.0, errors, errors == 0 ? "yes" : "NO");
    return errors == 0 ? 0 : 1;
}
