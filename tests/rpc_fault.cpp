// Fault: the RPC server is killed while decodes run on it. Upstream's RPC client does not return
// an error: it calls GGML_ABORT("Remote RPC server crashed or returned malformed response") on its
// dispatcher thread and the process ends with SIGABRT, whatever the caller (or llama-cancel) does.
// CTest expects that message; if upstream ever returns an error instead, the statuses printed
// here say so and the test fails until the README's Limits is updated. SIGPIPE is ignored, so that
// a write to the dead server's socket fails (EPIPE) and reaches that message, whichever of the
// client's write or read meets the closed socket first.
//   rpc_fault SMALL_MODEL RPC_SERVER
#include "support.h"

#include <csignal>
#include <cstdio>

namespace {
// The context's eval callback: kills the RPC server while the scheduler walks node `at` of the
// first decode's graph, on the decoding thread, so that the kill lands inside a decode every time
// (no sleep decides it). It asks for no node: the graph is not split.
struct server_killer {
    common::rpc_server * srv   = nullptr;
    int                  at    = 10;
    int                  asks  = 0;

    static bool cb(ggml_tensor *, bool ask, void * data) {
        auto * k = static_cast<server_killer *>(data);
        if (ask && ++k->asks == k->at) {
            std::fprintf(stderr, "killing the RPC server mid-decode (node %d of the first graph)\n", k->at);
            k->srv->stop();
        }
        return false;
    }
};
} // namespace

int main(int argc, char ** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: rpc_fault MODEL RPC_SERVER\n");
        return 2;
    }
#ifdef SIGPIPE
    std::signal(SIGPIPE, SIG_IGN);
#endif
    common::quiet_logs(false);
    common::backend_set set;
    set.rpc = true;
    common::load_backends(set);
    common::rpc_server srv(argv[2], 1);
    ggml_backend_dev_t dev = srv.ok() ? srv.add_device() : nullptr;
    if (dev == nullptr) {
        return 3;
    }
    auto model = common::load_model_on(argv[1], {dev}, -1);
    server_killer killer;
    killer.srv = &srv;
    common::context_options opt;
    opt.n_batch = opt.n_ubatch = 256;
    opt.offload_kqv  = true;
    opt.cb_eval      = server_killer::cb;
    opt.cb_eval_data = &killer;
    auto ctx = common::make_context(model.get(), opt);
    auto prompt = common::make_prompt(model.get(), 256);
    int8_t byte = 0;
    llama_cancel_decode_params p = llama_cancel_decode_default_params();
    p.byte = &byte;
    for (int i = 0; i < 100; ++i) {
        llama_memory_clear(llama_get_memory(ctx.get()), true);
        common::seq_batch b(prompt, 0, 256, 0);
        llama_cancel_decode_result r;
        const int32_t st = llama_cancel_decode(ctx.get(), b.get(), &p, &r, nullptr);
        llama_synchronize(ctx.get());
        if (st != LLAMA_CANCEL_OK) {
            std::fprintf(stderr, "decode %d after the kill: %s (%s)\n", i, llama_cancel_status_str(st), r.message);
        }
    }
    std::fprintf(stderr, "the process survived the server's death\n");
    return 0;
}
