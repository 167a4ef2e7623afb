// `llama-cancel bench`: the cancel benchmark (the project's main job).
#pragma once

int bench_main(int argc, char ** argv);

// `llama-cancel bench-backend NAME`: one backend row (vulkan, rpc, blas), in its own process.
int bench_backend_main(int argc, char ** argv);
