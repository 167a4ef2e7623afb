// The subcommands of the two executables, each `int NAME_main(argc, argv)` with argv[0] the subcommand:
// llama-cancel's (generate, embed, tts, check; main.cpp) and llama-cancel-bench's (the others; main_bench.cpp).
#pragma once

// `llama-cancel-bench bench`: the cancel benchmark (the project's main job).
int bench_main(int argc, char ** argv);

// `llama-cancel-bench bench-backend NAME`: one backend row (vulkan, rpc, blas), in its own process.
int bench_backend_main(int argc, char ** argv);

// `llama-cancel-bench bench-plans SETUP --model PATH`: where each call's checkpoints fell, for a token loop
// and repeated prefills, hook and stateless name; the calls whose checkpoints moved.
int bench_plans_main(int argc, char ** argv);

// `llama-cancel-bench bench-embed SETUP --model PATH`: an indexing job three ways (hook, stateless
// name, the byte read between calls): the byte at 0's cost a call, and stop latency.
int bench_embed_main(int argc, char ** argv);

// `llama-cancel-bench bench-memory --model PATH`: one memory-kind row (rollback cost), in its own process.
int bench_memory_main(int argc, char ** argv);

// `llama-cancel-bench bench-seq --model PATH`: per-sequence cancel in a shared 4-sequence batch: the
// survivors' extra time, and store-to-return latency when every sequence is cancelled.
int bench_seq_main(int argc, char ** argv);

// `llama-cancel-bench tune --model PATH --budget-ms B`: throughput and stop latency per n_ubatch, a recommendation.
int tune_main(int argc, char ** argv);

// `llama-cancel generate`: generation from a prompt that Ctrl-C stops at once.
int generate_main(int argc, char ** argv);

// `llama-cancel embed --model PATH --input FILE`: one pooled vector per line, JSON or .npy; Ctrl-C
// keeps the vectors of every line whose group finished.
int embed_main(int argc, char ** argv);

// `llama-cancel check --model PATH`: loads the model, makes a context with a hook bound, and says
// which stop path a cancel gets on each device of the context's scheduler.
int check_main(int argc, char ** argv);

// `llama-cancel-bench stress`: cancel/resume cycles at random nodes and cancel storms; nonzero on a fault.
int stress_main(int argc, char ** argv);

// `llama-cancel-bench bench-mtmd vision|audio`: one multimodal row (needs libmtmd), in its own process.
int bench_mtmd_main(int argc, char ** argv);

// `llama-cancel tts`: text to speech (needs libmtmd) into a WAV; Ctrl-C stops at once, keeping the audio so far.
int tts_main(int argc, char ** argv);

// `llama-cancel-bench bench-tts qwen3tts|pockettts`: one text-to-speech row (needs libmtmd), in its own process.
int bench_tts_main(int argc, char ** argv);
