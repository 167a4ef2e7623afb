// Fixtures shared by the gtest programs (library llama-cancel-test-fixtures): the environment
// reader, a suite that loads one model for all its tests, the program-wide backend setup and model
// (a gtest environment), the callbacks that stop a graph at a chosen node, memory and logits
// readers, and the one context factory (a hook bound the way hosts bind it). Not part of the
// library's API.
#pragma once

#include "support.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace fixtures {

// The value of environment variable `name`, "" when it is not set.
std::string env(const char * name);

// The model a suite's tests share (NULL outside such a suite), and the path it came from.
llama_model *       suite_model();
const std::string & suite_model_path();

// What a model suite's SetUpTestSuite does: quiet logs, the default (CPU) backends, the model at
// $var; fails the suite when $var is not set ("set VAR to `what`") or the model does not load.
void load_suite_model(const char * var, const char * what);
void free_suite_model();

// A suite whose tests share one model, loaded once per suite from the path in environment variable
// Suite::model_env (Suite::model_what says what to set it to). Base: ::testing::Test or
// ::testing::TestWithParam<T>.
template <typename Suite, typename Base = ::testing::Test> class model_suite : public Base {
  public:
    static void SetUpTestSuite() { load_suite_model(Suite::model_env, Suite::model_what); }
    static void TearDownTestSuite() { free_suite_model(); }
};

// The backend setup a program's tests run on and the model loaded on it (add_backend_environment),
// from the environment's SetUp to its TearDown.
struct test_backend_state {
    common::backend_setup setup;
    int32_t               n_gpu_layers = -1; // of `model` (-1: all)
    common::model_ptr     model;             // on the setup
    common::model_ptr     cpu_model;         // the same file on the CPU alone, when asked for

    const std::string & name() const { return setup.name; }
    // Attention and the KV cache on the setup's devices too where it has any, as a host offloads them.
    bool offload_kqv() const { return !setup.devices.empty(); }
};

// What a program's backend environment makes.
struct backend_environment_options {
    const char * model_env       = nullptr; // the variable that names the model file
    const char * model_what      = nullptr; // what to set it to, for the message when it is not set
    const char * default_backend = nullptr; // the setup when LLAMA_CANCEL_BACKEND is not set (NULL: it must be)
    // Layers offloaded on a given setup (NULL: all).
    int32_t (*n_gpu_layers)(const std::string & backend) = nullptr;
    bool cpu_reference = false; // also load the model on the CPU alone
    // Checked once the model is loaded (NULL: nothing): a failure there fails the program's tests.
    void (*check)() = nullptr;
};

// A gtest environment that makes the backend setup in LLAMA_CANCEL_BACKEND (its RPC servers from
// LLAMA_CANCEL_RPC_SERVER, started here and stopped after the tests) and loads the model in
// $model_env on it, once for the whole program; when either cannot be made, no test runs and the
// program fails. Register it at namespace scope, so that gtest_main finds it:
//   const auto * const g_environment = fixtures::add_backend_environment(options);
::testing::Environment * add_backend_environment(const backend_environment_options & opt);

// The program's backend setup and model (empty outside the environment).
const test_backend_state & test_backend();

// Stores 1 into `byte` at a chosen graph node, so that tests stop a graph where they mean to: as an
// eval callback (a hook's chain, or a context's cb_eval) it answers true at ask number `at` and
// stores the byte (when `byte` is set) once that node is computed; as an abort callback it stores at
// call number `at`. Counts calls either way; as an eval callback it records the ask number of each
// decode graph's last node ("result_output"), and with `record_threads` the thread of every call.
// With `while_grouping`, the eval callback asks for no node and stores the byte at ask `at` itself:
// a store that lands while the scheduler groups nodes, which only the next check can see.
// (tools/common/triggers.h has the tools' smaller one, without the records and modes the tests use.)
struct node_trigger {
    int                          calls          = 0;
    int                          at             = -1;
    int8_t *                     byte           = nullptr;
    bool                         record_threads = false;
    bool                         while_grouping = false;
    std::vector<int>             graph_ends;
    std::vector<std::thread::id> threads;

    static bool eval_cb(ggml_tensor * t, bool ask, void * data);
    static bool abort_cb(void * data);
    // Calls, `at`, graph ends and threads back to their start; the byte and the modes stay.
    void reset();
};

// A caller abort callback that holds the graph at call number `hold_at` until the byte is stored
// (at most 20 s: then `timed_out`, which the test asserts false), so that a store from another
// thread lands inside the decode without timing assumptions; records the thread of every call.
struct gate {
    std::atomic<bool>            started{false};
    std::atomic<bool>            timed_out{false};
    int8_t *                     byte    = nullptr;
    int                          hold_at = 1;
    int                          calls   = 0;
    std::vector<std::thread::id> threads;

    static bool cb(void * data);
};

// The last position sequence `seq` holds in `ctx`'s memory (-1: none).
llama_pos pos_max(llama_context * ctx, llama_seq_id seq = 0);

// Sequence `seq`'s state as llama_state_seq_get_data writes it, to compare memories byte for byte.
std::vector<uint8_t> seq_state(llama_context * ctx, llama_seq_id seq);

// Largest absolute difference of `a` from the reference `b`, relative to b's largest magnitude.
double relative_difference(const std::vector<float> & a, const std::vector<float> & b);

// Last logits of a plain llama_decode of the whole `prompt` in one call (n_ubatch at a time) on a
// fresh context, as a reference.
std::vector<float> plain_last_logits(llama_model * model, const std::vector<llama_token> & prompt, uint32_t n_ubatch);

// A hook chaining `trig` (NULL: none) as its eval callback.
common::hook_ptr make_hook(node_trigger * trig);

// The gtest programs' contexts: each is made by make_bound_context, whichever helper a test calls.

// Options of a test context: n_batch, n_ubatch and n_seq_max, eval callback `cb` with `cb_data`
// (NULL: none); the rest as common::context_options has them (attention and KV cache on the CPU).
common::context_options context_options(uint32_t n_batch, uint32_t n_ubatch, uint32_t n_seq_max = 1,
                                        ggml_backend_sched_eval_callback cb = nullptr, void * cb_data = nullptr);

// common::make_context with `hook` bound into the context's parameters through
// llama_cancel_hook_bind, as a host does: the hook takes opt.cb_eval, if any, as its chain. With no
// hook (NULL), opt.cb_eval stays the context's own eval callback.
common::context_ptr make_bound_context(llama_model * model, llama_cancel_hook * hook, common::context_options opt);

// make_bound_context on the program's backend setup (test_backend()): attention and the KV cache
// offloaded where the setup has devices, as a host offloads them.
common::context_ptr make_backend_context(llama_model * model, llama_cancel_hook * hook, common::context_options opt);

// A context with its own hook, bound as a host binds it; the hook chains `trig` when given.
struct hooked_context {
    common::hook_ptr    hook;
    common::context_ptr ctx;
};
hooked_context make_hooked(llama_model * model, uint32_t n_batch, uint32_t n_ubatch, node_trigger * trig = nullptr,
                           uint32_t n_seq_max = 1);

} // namespace fixtures
