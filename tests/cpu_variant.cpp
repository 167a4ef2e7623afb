// Which of ggml's CPU backend variants this machine loads (ggml scores each libggml-cpu-*.so it
// ships against the CPU and loads the best: x86-64 haswell, zen4...; arm64 armv8.0_1 to
// armv9.2_2) and the features that variant reports; given a quantized model, also the layouts
// ggml repacks its matrices into for the CPU's int8 kernels. The tests' decodes run on these; the
// arm64 facts in docs/tests.md#arm64 quote this output. Fails only when no CPU backend loads or the
// model does not.
// usage: cpu_variant [MODEL.gguf]
#include "ggml-backend.h"
#include "llama.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <string>

int main(int argc, char ** argv) {
    static std::map<std::string, int> repacked;
    // llama_log_set routes ggml's log too: load_backend names the variant, repack the layouts.
    llama_log_set(
        [](ggml_log_level, const char * text, void *) {
            if (std::strstr(text, "load_backend") != nullptr) {
                std::fputs(text, stdout);
            }
            const char * with = std::strstr(text, "repack tensor");
            with              = with != nullptr ? std::strstr(with, " with ") : nullptr;
            if (with != nullptr) {
                std::string layout(with + 6);
                layout.erase(layout.find_last_not_of(" \n") + 1);
                ++repacked[layout];
            }
        },
        nullptr);
    ggml_backend_load_all();
    ggml_backend_reg_t cpu = ggml_backend_reg_by_name("CPU");
    if (cpu == nullptr || ggml_backend_reg_dev_count(cpu) == 0) {
        std::puts("FAIL: no CPU backend loaded");
        return 1;
    }
    std::printf("cpu device: %s\n", ggml_backend_dev_description(ggml_backend_reg_dev_get(cpu, 0)));
    auto get_features = reinterpret_cast<ggml_backend_get_features_t>(
        ggml_backend_reg_get_proc_address(cpu, "ggml_backend_get_features"));
    std::printf("features:");
    for (ggml_backend_feature * f = get_features != nullptr ? get_features(cpu) : nullptr;
         f != nullptr && f->name != nullptr; ++f) {
        std::printf(" %s=%s", f->name, f->value);
    }
    std::printf("\n");
    if (argc > 1) {
        llama_model_params mp = llama_model_default_params();
        llama_model *      m  = llama_model_load_from_file(argv[1], mp);
        if (m == nullptr) {
            std::printf("FAIL: cannot load %s\n", argv[1]);
            return 1;
        }
        std::printf("repacked matrices of %s:", argv[1]);
        for (const auto & [layout, n] : repacked) {
            std::printf(" %s x%d", layout.c_str(), n);
        }
        std::printf("%s\n", repacked.empty() ? " none" : "");
        llama_model_free(m);
    }
    return 0;
}
