// The bench's rows that each run in a child process of their own (`llama-cancel-bench bench-backend`,
// `bench-mtmd`, `bench-memory`, `bench-seq`), so that each loads exactly its backends and models:
// the children write their row's JSON object into a file, read back here. Part of the `bench`
// command.
#pragma once

#include "bench/bench.h"
#include "llama.h"

namespace bench {

// Backend rows (bench-backend NAME): the abort callback, the hook and the stateless callback.
section backend_rows(const options & opt);

// Multimodal rows (bench-mtmd vision|audio) on synthetic projectors sized to `model`; none without
// libmtmd.
section mtmd_rows(const options & opt, const llama_model * model);

// Text-to-speech rows (bench-tts PIPELINE --backend B) on generated bench pairs; none without libmtmd.
section tts_rows(const options & opt);

// Memory-kind rows (bench-memory) on the generated bench model of each architecture; ok: every
// rollback exact.
section memory_rows(const options & opt);

// Per-sequence cancel rows (bench-seq), one per backend.
section seq_rows(const options & opt);

// Plan stability rows (bench-plans), one per setup; ok: no call's checkpoints moved after the first two.
section plans_rows(const options & opt);
// bench-embed per setup of opt.embed: a 2,048-passage job on a generated BERT, three ways.
section embed_rows(const options & opt);

} // namespace bench
