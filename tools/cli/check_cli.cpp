// `llama-cancel check`: loads a model (llama_cancel_model_load), makes a context with a hook bound
// (llama_cancel_hook_bind), and says, for each device of the context's scheduler, how a cancel
// reaches a graph there during the llama_cancel_* calls: the abort callback after each node where
// the device's backend registry offers "ggml_backend_set_abort_callback" (the CPU), else the hook's
// eval-callback checkpoints, else (no hook) nothing before the ubatch in flight ends.
#include "checkpoints/abort_reach.h" // registry_takes_abort_callback: the library's own rule, header-only
#include "commands.h"
#include "common/args.h"
#include "support.h"

#ifdef LLAMA_CANCEL_HAVE_MTMD
#    include "mtmd.h"
#endif

#include <cstdio>
#include <string>
#include <vector>

namespace {

struct check_options {
    std::string model, mmproj;
    int         n_gpu_layers = llama_model_default_params().n_gpu_layers;
    int         threads      = 2;
};

// The command line into `o`: -1 to go on, else the exit status.
int parse_options(int argc, char ** argv, check_options & o) {
    cli_args::parser p("usage: llama-cancel check --model PATH [--mmproj PATH] [--n-gpu-layers N] [--threads N]\n");
    p.option("--model|-m", &o.model, "PATH", "model to load (required)")
        .option("--mmproj", &o.mmproj, "PATH", "multimodal projector: where its encodes stop too")
        .option("--n-gpu-layers|-ngl", &o.n_gpu_layers, "N", "layers to offload (negative: all)")
        .option("--threads|-t", &o.threads, "N", "CPU threads");
    const int rc = p.parse(argc, argv);
    if (rc >= 0) {
        return rc;
    }
    return p.check({{o.model.empty(), "--model is required"},
                    {!llama_cancel_has_mtmd() && !o.mmproj.empty(), "this build has no libmtmd: --mmproj is not available"},
                    {o.threads < 1, "--threads must be at least 1"}});
}

// The devices llama.cpp gives a context's scheduler when the model names none (llama_model_params
// .devices unset): every GPU (RPC servers included), an integrated GPU only where there is no
// other, every accelerator (BLAS...) and the CPU.
std::vector<ggml_backend_dev_t> scheduler_devices() {
    bool have_gpu = false;
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        have_gpu = have_gpu || ggml_backend_dev_type(ggml_backend_dev_get(i)) == GGML_BACKEND_DEVICE_TYPE_GPU;
    }
    std::vector<ggml_backend_dev_t> out;
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        ggml_backend_dev_t dev  = ggml_backend_dev_get(i);
        const auto         type = ggml_backend_dev_type(dev);
        if (type == GGML_BACKEND_DEVICE_TYPE_CPU || type == GGML_BACKEND_DEVICE_TYPE_ACCEL ||
            type == GGML_BACKEND_DEVICE_TYPE_GPU || (type == GGML_BACKEND_DEVICE_TYPE_IGPU && !have_gpu)) {
            out.push_back(dev);
        }
    }
    return out;
}

const char * type_name(ggml_backend_dev_t dev) {
    switch (ggml_backend_dev_type(dev)) {
        case GGML_BACKEND_DEVICE_TYPE_CPU: return "cpu";
        case GGML_BACKEND_DEVICE_TYPE_GPU: return "gpu";
        case GGML_BACKEND_DEVICE_TYPE_IGPU: return "igpu";
        case GGML_BACKEND_DEVICE_TYPE_ACCEL: return "accel";
        default: return "other";
    }
}

// Which stop path a cancel gets on `dev`. A device that computes into the CPU's buffers (BLAS) is
// the CPU's for the library (abort_reach.h): it stops at the next CPU node.
const char * stop_path(ggml_backend_dev_t dev, bool hooked) {
    if (llama_cancel::registry_takes_abort_callback(ggml_backend_dev_backend_reg(dev))) {
        return "abort callback after each node";
    }
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    if (cpu != nullptr && ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_ACCEL &&
        ggml_backend_dev_buffer_type(dev) == ggml_backend_dev_buffer_type(cpu) &&
        llama_cancel::registry_takes_abort_callback(ggml_backend_dev_backend_reg(cpu))) {
        return "abort callback at the next CPU node (it computes into CPU buffers)";
    }
    return hooked ? "eval-callback checkpoints (hook)" : "between ubatches only";
}

} // namespace

int check_main(int argc, char ** argv) {
    check_options o;
    const int     rc = parse_options(argc, argv, o);
    if (rc >= 0) {
        return rc;
    }
    common::quiet_logs();
    common::load_backends({true, true, true}); // every backend ggml finds, as a host gets them
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers       = o.n_gpu_layers;
    llama_cancel_load_result lr;
    common::model_ptr model(llama_cancel_model_load(o.model.c_str(), mp, nullptr, &lr));
    if (!model) {
        std::fprintf(stderr, "error: cannot load the model %s: %s\n", o.model.c_str(), lr.message);
        return 1;
    }
    // The context as a host makes it: default parameters, a small window, the hook bound.
    common::hook_ptr     hook(llama_cancel_hook_init(nullptr)); // outlives the context
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = cp.n_batch = cp.n_ubatch = 512;
    cp.n_threads = cp.n_threads_batch = common::threads_override().value_or(o.threads);
    const bool hooked = hook && llama_cancel_hook_bind(hook.get(), &cp);
    common::context_ptr ctx(llama_init_from_model(model.get(), cp));
    if (!ctx) {
        std::fprintf(stderr, "error: cannot create a context for %s\n", o.model.c_str());
        return 1;
    }
    char desc[128];
    llama_model_desc(model.get(), desc, sizeof(desc));
    std::printf("model: %s (%s, %d layers, --n-gpu-layers %d)\nhook: %s\n", o.model.c_str(), desc,
                llama_model_n_layer(model.get()), o.n_gpu_layers,
                hooked ? "bound (llama_cancel_hook_bind)" : "not bound");
    std::printf("where a cancel stops a graph in the llama_cancel_* calls, per device of the context's scheduler:\n");
    for (ggml_backend_dev_t dev : scheduler_devices()) {
        std::printf("  %s (%s, %s): %s\n", ggml_backend_dev_name(dev), type_name(dev), ggml_backend_dev_description(dev),
                    stop_path(dev, hooked));
    }
#ifdef LLAMA_CANCEL_HAVE_MTMD
    if (!o.mmproj.empty()) {
        mtmd_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
        common::hook_ptr encode_hook(llama_cancel_hook_init(nullptr));
        mtmd_context *   mctx = llama_cancel_mtmd_init_from_file(o.mmproj.c_str(), model.get(), encode_hook.get(),
                                                                 o.threads, o.n_gpu_layers != 0, nullptr, &lr);
        if (mctx == nullptr) {
            std::fprintf(stderr, "error: cannot load the projector %s: %s\n", o.mmproj.c_str(), lr.message);
            return 1;
        }
        mtmd_free(mctx);
        std::printf("projector %s: its encodes stop at eval-callback checkpoints (hook) on every device "
                    "(clip takes no abort callback)\n",
                    o.mmproj.c_str());
    }
#endif
    return 0;
}
