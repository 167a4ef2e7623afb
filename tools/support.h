// Helpers shared by the CLI, the benchmark and the tests: backends, models, contexts, batches.
// Not part of the library's API.
#pragma once

#include "llama-cancel.h"
#include "llama.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace lcs {

// Loads Debian's dynamically built ggml backends, keeping only those asked for (the CPU backend
// always). BLAS, Vulkan and RPC would otherwise take matmuls away from the CPU backend.
struct backend_set {
    bool blas   = false;
    bool vulkan = false;
    bool rpc    = false;
};
void load_backends(const backend_set & set = {});

// Silences llama.cpp's and ggml's logs: all of them, or those below ERROR. Cancelled decodes log
// expected errors ("failed to decode, ret = 2"), which the tools and tests report themselves.
void quiet_logs(bool errors_too = true);

struct hook_deleter { void operator()(llama_cancel_hook * h) const { llama_cancel_hook_free(h); } };
using hook_ptr = std::unique_ptr<llama_cancel_hook, hook_deleter>;

// A hook with the default interval and `chain` (may be NULL) as its chained eval callback.
hook_ptr make_hook(ggml_backend_sched_eval_callback chain = nullptr, void * chain_data = nullptr);

// Stores 1 into `flag` at a chosen graph node, so that tests stop a graph where they mean to:
// as an eval callback (a hook's chain) it asks for node number `at` and stores the byte once that
// node is computed; as an abort callback it stores at call number `at`. Counts calls either way.
struct node_trigger {
    int      calls = 0;
    int      at    = -1;
    int8_t * flag  = nullptr;
    static bool eval_cb(ggml_tensor * t, bool ask, void * data);
    static bool abort_cb(void * data);
};

// The stateless callback as a host binds it (cb_eval = llama_cancel_eval_callback, user data = the
// byte), observed from outside by the tests and the benchmark: set cb_eval to eval_cb and its user
// data to the probe; every call goes through unchanged with the probe's byte. It counts asks and
// the checkpoints the callback passes, notes the largest node's work, and, for the tests, stores the
// byte at ask number `store_at` as a store from another thread during that node's compute lands:
// once the scheduler has grouped the node's view, which only a checkpoint ending that view can see.
// The view ends at the first node answered true; when the split ends first (the next node asked
// lives in another buffer type), the view was computed with no checkpoint and the store comes late,
// at that next node. With `while_grouping`, it stores before ask `store_at` instead: the check made
// while grouping sees it.
struct stateless_probe {
    int8_t byte           = 0;
    int    asks           = 0;
    int    checkpoints    = 0;     // passed, the byte at 0
    double max_work       = 0.0;   // estimated FLOPs of the largest node asked about
    int    store_at       = -1;
    bool   while_grouping = false;
    int    stored_at      = -1;    // ask number when the byte was stored
    bool   stored_late    = false; // the view of store_at ended with no checkpoint: stored after it
    int    stopped_at     = -1;    // ask number of the checkpoint that returned false (-1: none)

    static bool eval_cb(ggml_tensor * t, bool ask, void * data);
    // Counters, store and byte back to zero; the byte is stored at ask `at` (-1: never).
    void rearm(int at);

  private:
    bool        pending_    = false;   // node store_at asked, its view not closed yet
    const void * store_buft_ = nullptr; // where node store_at lives
    void store(bool late);
};

struct model_deleter { void operator()(llama_model * m) const { llama_model_free(m); } };
struct context_deleter { void operator()(llama_context * c) const { llama_free(c); } };
using model_ptr   = std::unique_ptr<llama_model, model_deleter>;
using context_ptr = std::unique_ptr<llama_context, context_deleter>;

// CPU-only model (n_gpu_layers 0) unless `n_gpu_layers` says otherwise. NULL on failure.
model_ptr load_model(const std::string & path, int32_t n_gpu_layers = 0);

struct context_options {
    uint32_t n_ctx     = 1024;
    uint32_t n_batch   = 512;
    uint32_t n_ubatch  = 512;
    int32_t  n_threads = 2;
    uint32_t n_seq_max = 1;
    bool     offload_kqv = false; // the CPU protocol keeps attention on the CPU; offloaded setups set it
    bool     embeddings  = false;
    ggml_backend_sched_eval_callback cb_eval      = nullptr;
    void *                           cb_eval_data = nullptr;
};
// Context with op_offload off (and offload_kqv as asked), as the protocols need. NULL on failure.
context_ptr make_context(llama_model * model, const context_options & opt);

// Deterministic prompt of `n` ordinary (non-control) tokens.
std::vector<llama_token> make_prompt(const llama_model * model, int32_t n, uint32_t seed = 1);

// A batch for one sequence: tokens[first, first + n) at positions start_pos + i, logits for the
// last token only. Owns its storage; `get()` is valid while the object lives.
class seq_batch {
  public:
    seq_batch(const std::vector<llama_token> & tokens, int32_t first, int32_t n, llama_pos start_pos,
              llama_seq_id seq = 0);
    llama_batch get();
    // Asks (or not) for the output of batch index i.
    void set_output(int32_t i, bool on) { logits_.at(i) = on ? 1 : 0; }
  private:
    std::vector<llama_token>    token_;
    std::vector<llama_pos>      pos_;
    std::vector<int32_t>        n_seq_id_;
    std::vector<llama_seq_id>   seq_;
    std::vector<llama_seq_id *> seq_ptr_;
    std::vector<int8_t>         logits_;
};

// Logits of the last output of the last decode, copied.
std::vector<float> last_logits(llama_context * ctx);

// Runs a program (PATH lookup) and waits; its exit code, 128 + signal, or -1.
int run_command(const std::vector<std::string> & args);

// Generates a synthetic model with scripts/make_model.py unless `path` exists. Returns false and
// prints why on failure.
bool ensure_model(const std::string & generator, const std::string & path, const std::string & preset,
                  const std::string & arch = "llama", const std::vector<std::string> & extra = {});

// Folder of the running executable, without the trailing slash ("." when it cannot be read).
std::string executable_dir();

// Path of one of the CLI's Python scripts (make_model.py, make_mmproj.py, plot_bench.py): from
// $LLAMA_CANCEL_SCRIPTS_DIR, else the install layout relative to the executable
// (<bindir>/LLAMA_CANCEL_SCRIPTS_REL), else the build tree's copies in scripts/ beside it.
std::string script_path(const std::string & name);

// Folder for the models the CLI generates, created if missing: $LLAMA_CANCEL_CACHE_DIR/models,
// else $XDG_CACHE_HOME/llama-cancel/models, else ~/.cache/llama-cancel/models
// (~/Library/Caches/llama-cancel/models on macOS). Ends with a slash.
std::string models_cache_dir();

double now_ms();

// Loads a model on explicit devices (NULL-terminated list built here), `n_gpu_layers` of them
// offloaded. NULL on failure.
model_ptr load_model_on(const std::string & path, const std::vector<ggml_backend_dev_t> & devices,
                        int32_t n_gpu_layers);

// A ggml-rpc-server child process on 127.0.0.1 serving its CPU device (-d CPU, whatever other
// devices the environment exposes); stopped by PID.
class rpc_server {
  public:
    // Starts `binary` on a free port with `threads` threads; waits until it accepts connections.
    rpc_server(const std::string & binary, int threads);
    ~rpc_server();
    rpc_server(const rpc_server &) = delete;
    rpc_server & operator=(const rpc_server &) = delete;

    bool               ok() const { return pid_ > 0 && ready_; }
    const std::string & endpoint() const { return endpoint_; }
    // Registers the server with the RPC backend; its device, or NULL with a message on stderr.
    ggml_backend_dev_t add_device() const;
    void stop();

  private:
    int         pid_   = -1;
    bool        ready_ = false;
    std::string endpoint_;
};

// A llama-cancel-delay-proxy child process on a free port of 127.0.0.1, forwarding to `target`
// ("127.0.0.1:PORT") with each direction delayed by `delay_ms`: a loopback server that answers like
// a LAN host. Stopped by PID.
class delay_proxy {
  public:
    // Starts `binary` (posix_spawn: callers are threaded); waits until it accepts connections.
    delay_proxy(const std::string & binary, const std::string & target, double delay_ms);
    ~delay_proxy();
    delay_proxy(const delay_proxy &) = delete;
    delay_proxy & operator=(const delay_proxy &) = delete;

    bool                ok() const { return pid_ > 0 && ready_; }
    const std::string & endpoint() const { return endpoint_; }
    int                 pid() const { return pid_; } // -1 once stopped
    double              delay_ms() const { return delay_ms_; }
    void                stop();

  private:
    int         pid_      = -1;
    bool        ready_    = false;
    double      delay_ms_ = 0.0;
    std::string endpoint_;
};

// The llama-cancel-delay-proxy built with this project (its build-tree path).
std::string delay_proxy_binary();

// One of the setups the tests, the benchmark and the stress command run on: "cpu", "blas" (BLAS
// beside the CPU), "vulkan" (Mesa's llvmpipe as Vulkan0, all layers), "rpc1" / "rpc2" (one or two
// ggml-rpc-server processes on loopback, serving their CPU), "rpc1-lan" / "rpc2-lan" (the same,
// each server reached through a delay proxy: $LLAMA_CANCEL_RPC_DELAY_MS each way, default 0.5).
// Loads exactly the ggml backends the setup needs and starts its servers, which stop with it.
struct backend_setup {
    std::string                              name;
    std::vector<std::unique_ptr<rpc_server>> servers;
    std::vector<std::unique_ptr<delay_proxy>> proxies; // declared after servers: destroyed before them
    std::vector<ggml_backend_dev_t>          devices; // empty: the CPU (and BLAS) only
    std::string                              description;

    // Loads a model on the setup's devices with `n_gpu_layers` of them offloaded (-1: all).
    model_ptr load(const std::string & path, int32_t n_gpu_layers) const;
};
// False with a message on stderr when the setup cannot be made (unknown name, no Vulkan0, a
// server that does not start). `rpc_server_bin` is ggml-rpc-server's path.
bool setup_backend(const std::string & name, const std::string & rpc_server_bin, int rpc_threads,
                   backend_setup & out);

} // namespace lcs
