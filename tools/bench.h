// `llama-cancel bench`: the cancel benchmark (the project's main job).
#pragma once

int bench_main(int argc, char ** argv);
