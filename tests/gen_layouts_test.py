#!/usr/bin/env python3
"""scripts/gen_layouts.py on a scratch copy of the tree: --check passes on what it wrote, names a
generated file that was edited by hand or is missing, a renamed or added field reaches all three
files, llama.h's and mtmd.h's structs are read with a kind for each field (two fields swapped or a
type changed there is drift), and a field type with no kind (or a declaration it cannot read) stops
it with a message.
usage: gen_layouts_test.py SOURCE_DIR [--llama-h FILE] [--mtmd-h FILE]
(the installed llama.h and mtmd.h, for the tests on the tree's own files; synthetic ones otherwise)"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # it imports the generator and the Python module from the source tree
_ap = argparse.ArgumentParser()
_ap.add_argument("src", nargs="?", default=os.path.join(os.path.dirname(__file__), ".."))
_ap.add_argument("--llama-h")
_ap.add_argument("--mtmd-h")
_args, _rest = _ap.parse_known_args()
sys.argv[1:] = _rest
SRC = os.path.abspath(_args.src)
# The headers the build compiles against: passed on to the generator (else it looks for them).
REAL_HEADERS = [a for opt, v in (("--llama-h", _args.llama_h), ("--mtmd-h", _args.mtmd_h)) if v for a in (opt, v)]
HEADER = "include/llama-cancel.h"
OUTPUTS = ("src/abi/abi_layouts.inc", "bindings/python/llama_cancel/_layouts.py", "bindings/node/layouts.js")
SKIP = 77


# A header of the generator's own, with one field of every kind, so that these tests do not depend on
# the real header's field names (which may change).
SYNTHETIC = """
struct llama_cancel_hook; // opaque: no definition
/* a block comment: struct llama_cancel_not_a_struct { int x; }; */
    struct llama_cancel_every_kind {
        const int8_t *             byte;     // a byte
        const int8_t * const *     flags;    // bytes
        const char*                text;     // a string
        struct llama_cancel_hook * hook;     // handles and callbacks
        ggml_abort_callback        cb;
        double                     ms;
        uint64_t                   count;
        int64_t                    samples;
        float                      scale;
        uint32_t                   seed;
        int32_t                    status;
        char                       message[256]; // why
    };

    struct llama_cancel_small {
        int32_t a;
        int32_t b;
    };
"""

# llama.h's and mtmd.h's structs as the generator reads them (FOREIGN), with their kinds of field
# (enum, size_t, typed arrays, a typedef'd struct, mtmd_gen_*'s binary state_data), in headers of
# the test's own.
SYNTHETIC_LLAMA = """
    typedef struct llama_batch {
        int32_t n_tokens;

        llama_token  *  token;
        float        *  embd;
        llama_seq_id ** seq_id;
        int8_t       *  logits;   // TODO: rename
    } llama_batch;

    struct llama_model_params {
        ggml_backend_dev_t * devices;
        enum llama_split_mode split_mode; // how to split
        const float * tensor_split;
        bool vocab_only;
    };

    struct llama_context_params {
        uint32_t n_ctx;                 // text context
        uint32_t n_batch;
        ggml_backend_sched_eval_callback cb_eval;
        size_t n_samplers;
    };
"""
SYNTHETIC_MTMD = """
struct mtmd_input_text {
    const char * text;
    size_t text_len;
};
struct mtmd_gen_audio_info {
    enum mtmd_gen_audio_type type;
    int32_t sample_rate; // in Hz
};
struct mtmd_gen_inp {
    enum mtmd_gen_process_type type;
    const char * state_data;
    size_t       state_size;
};
struct mtmd_gen_out {
    const int32_t * codes;
    size_t          n_codes;
    const char * state_data;
};
"""
LLAMA_WANT = {
    "llama_batch": [("n_tokens", "i32"), ("token", "i32*"), ("embd", "f32*"), ("seq_id", "i32**"), ("logits", "i8*")],
    "llama_model_params": [("devices", "ptr"), ("split_mode", "enum"), ("tensor_split", "f32*"),
                           ("vocab_only", "bool")],
    "llama_context_params": [("n_ctx", "u32"), ("n_batch", "u32"), ("cb_eval", "ptr"), ("n_samplers", "usize")],
}
MTMD_WANT = {
    "mtmd_input_text": [("text", "str"), ("text_len", "usize")],
    "mtmd_gen_audio_info": [("type", "enum"), ("sample_rate", "i32")],
    "mtmd_gen_inp": [("type", "enum"), ("state_data", "ptr"), ("state_size", "usize")],
    "mtmd_gen_out": [("codes", "i32*"), ("n_codes", "usize"), ("state_data", "ptr")],
}


class GenLayouts(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="gen_layouts_")
        self.addCleanup(shutil.rmtree, self.root)
        for rel in (HEADER, "scripts/gen_layouts.py") + OUTPUTS:
            os.makedirs(os.path.dirname(os.path.join(self.root, rel)), exist_ok=True)
            shutil.copy(os.path.join(SRC, rel), os.path.join(self.root, rel))
        self.write("llama.h", SYNTHETIC_LLAMA)
        self.write("mtmd.h", SYNTHETIC_MTMD)

    def run_gen(self, *args, headers=None):
        """The generator on the scratch tree, with the synthetic llama.h and mtmd.h (`headers`: other
        arguments, such as REAL_HEADERS)."""
        if headers is None:
            headers = ["--llama-h", self.path("llama.h"), "--mtmd-h", self.path("mtmd.h")]
        return subprocess.run([sys.executable, os.path.join(self.root, "scripts/gen_layouts.py"), "--root", self.root,
                               *headers, *args], capture_output=True, text=True)

    def run_real(self, *args):
        """The generator with the installed llama.h and mtmd.h; the test is skipped without an mtmd.h."""
        r = self.run_gen(*args, headers=REAL_HEADERS)
        if r.returncode == SKIP:
            self.skipTest(r.stderr.strip())
        return r

    def path(self, rel):
        return os.path.join(self.root, rel)

    def read(self, rel):
        with open(self.path(rel)) as f:
            return f.read()

    def write(self, rel, text):
        with open(self.path(rel), "w") as f:
            f.write(text)

    def write_header(self, text):
        self.write(HEADER, text)

    def synthetic(self, old=None, new=None):
        """The synthetic header (with `old` replaced by `new`) generated into the scratch tree."""
        text = SYNTHETIC if old is None else SYNTHETIC.replace(old, new, 1)
        self.assertTrue(old is None or old in SYNTHETIC, old)
        self.write_header(text)
        return self.run_gen()

    def test_the_trees_files_are_current(self):
        r = self.run_real("--check")
        self.assertEqual(r.returncode, 0, r.stderr)
        for rel in OUTPUTS:
            self.assertIn("generated by scripts/gen_layouts.py from include/llama-cancel.h, llama.h and mtmd.h; "
                          "do not edit", self.read(rel).splitlines()[0], rel)

    def test_every_kind(self):
        r = self.synthetic()
        self.assertEqual(r.returncode, 0, r.stderr)
        want = [("byte", "byte"), ("flags", "bytes"), ("text", "str"), ("hook", "ptr"), ("cb", "ptr"), ("ms", "f64"),
                ("count", "u64"), ("samples", "i64"), ("scale", "f32"), ("seed", "u32"), ("status", "i32"),
                ("message", "char[256]")]
        scope = {}
        exec(self.read(OUTPUTS[1]), scope)
        self.assertEqual(scope["LAYOUTS"], {"llama_cancel_every_kind": want, "llama_cancel_small": [("a", "i32"),
                                                                                                  ("b", "i32")]})
        js = self.read(OUTPUTS[2])
        self.assertIn("        llama_cancel_every_kind: [\n" + "".join(f"            ['{f}', '{k}'],\n" for f, k in want),
                      js)
        cpp = self.read(OUTPUTS[0])
        self.assertIn("".join(f"    LC_FIELD(llama_cancel_every_kind, {f}),\n" for f, _ in want), cpp)
        self.assertIn("LC_SZ(llama_cancel_small, a),\n            LC_SZ(llama_cancel_small, b));", cpp)
        self.assertIn("LC_STRUCT(llama_cancel_every_kind, llama_cancel_every_kind_fields), \\\n"
                      "    LC_STRUCT(llama_cancel_small, llama_cancel_small_fields)\n", cpp)
        self.assertNotIn("not_a_struct", cpp + js)

    def test_every_kind_has_a_type_in_each_binding(self):
        sys.path[:0] = [os.path.join(SRC, "scripts"), os.path.join(SRC, "bindings/python")]
        try:
            import gen_layouts
            from llama_cancel import abi
        finally:
            del sys.path[:2]
        kinds = set(gen_layouts.KINDS.values()) | {k for _, k in gen_layouts.FIELD_KINDS.values()}
        self.assertEqual(kinds - set(abi._CTYPES), set(), "kinds abi.py's _CTYPES does not map")
        with open(os.path.join(SRC, "bindings/node/index.js")) as f:
            block = re.search(r"const KOFFI_TYPES = \{(.*?)\};", f.read(), re.S).group(1)
        self.assertEqual(kinds - set(re.findall(r"'?([\w*]+)'?:", block)), set(),
                         "kinds index.js's KOFFI_TYPES does not map")
        self.assertEqual(set(gen_layouts.ARRAY_KINDS.values()), {"char"}, "abi.py and index.js map char[N] only")

    def test_a_hand_edit_or_a_missing_file_is_drift(self):
        with open(self.path(OUTPUTS[1]), "a") as f:
            f.write("# a hand edit\n")
        os.remove(self.path(OUTPUTS[2]))
        r = self.run_real("--check")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"drift: {OUTPUTS[1]} differs", r.stderr)
        self.assertIn(f"drift: {OUTPUTS[2]} is missing", r.stderr)
        self.assertNotIn(OUTPUTS[0], r.stderr)
        self.assertEqual(self.run_real().returncode, 0)  # regenerating repairs both
        self.assertEqual(self.run_real("--check").returncode, 0)

    def test_a_header_change_reaches_every_file(self):
        self.assertEqual(self.synthetic().returncode, 0)
        self.write_header(SYNTHETIC.replace("int32_t b;", "int32_t renamed;\n        uint32_t added;"))
        r = self.run_gen("--check")
        self.assertEqual(r.returncode, 1)
        self.assertTrue(all(rel in r.stderr for rel in OUTPUTS), r.stderr)
        self.assertEqual(self.run_gen().returncode, 0)
        cpp, py, js = (self.read(rel) for rel in OUTPUTS)
        self.assertIn("LC_FIELD(llama_cancel_small, renamed),\n    LC_FIELD(llama_cancel_small, added),", cpp)
        self.assertNotIn("LC_FIELD(llama_cancel_small, b)", cpp)
        self.assertIn("LC_SZ(llama_cancel_small, added));", cpp)
        self.assertIn('("renamed", "i32"),\n        ("added", "u32"),', py)
        self.assertIn("['renamed', 'i32'],\n            ['added', 'u32'],", js)

    def test_a_type_with_no_kind_stops_it(self):
        self.assertEqual(self.synthetic().returncode, 0)
        before = self.read(OUTPUTS[0])
        r = self.synthetic("uint32_t                   seed;", "int16_t seed;")
        self.assertEqual(r.returncode, 2)
        self.assertIn("struct llama_cancel_every_kind, field `int16_t seed`: unknown field type `int16_t`", r.stderr)
        self.assertIn("KINDS", r.stderr)
        self.assertEqual(self.read(OUTPUTS[0]), before, "nothing written")
        self.assertEqual(self.run_gen("--check").returncode, 2)

    def test_declarations_it_cannot_read_stop_it(self):
        for old, new, says in (("int32_t a;", "int32_t a, c;", "one plain field per declaration"),
                               ("int32_t a;", "int32_t a : 8;", "one plain field per declaration"),
                               ("int32_t a;", "void (*fn)(void);", "one plain field per declaration"),
                               ("char                       message[256];", "float message[4];", "ARRAY_KINDS"),
                               ("int32_t b;\n    };", "int32_t b\n    };", "has no ';'"),
                               ("int32_t b;", "int32_t a;", "names a field twice"),
                               ("int32_t a;", "struct { int x; } a;", "cannot read the definition")):
            with self.subTest(new=new):
                r = self.synthetic(old, new)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(says, r.stderr)


    def test_size_t_and_enums_stay_out_of_the_header(self):
        for new, says in (("size_t seed;", "seed (usize)"), ("enum ggml_type seed;", "seed (enum)")):
            with self.subTest(new=new):
                r = self.synthetic("uint32_t                   seed;", new)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(f"struct llama_cancel_every_kind: {says}: the header's structs hold fixed-width types",
                              r.stderr)

    def test_llama_h_and_mtmd_h_structs(self):
        r = self.synthetic()
        self.assertEqual(r.returncode, 0, r.stderr)
        scope = {}
        exec(self.read(OUTPUTS[1]), scope)
        self.assertEqual(scope["LLAMA_LAYOUTS"], LLAMA_WANT)
        self.assertEqual(scope["MTMD_LAYOUTS"], MTMD_WANT)
        js = self.read(OUTPUTS[2])
        self.assertIn("    LLAMA_LAYOUTS: {\n        llama_batch: [\n            ['n_tokens', 'i32'],\n"
                      "            ['token', 'i32*'],\n", js)
        self.assertIn("        mtmd_gen_out: [\n            ['codes', 'i32*'],\n            ['n_codes', 'usize'],\n"
                      "            ['state_data', 'ptr'],\n        ],\n    },\n};\n", js)
        cpp = self.read(OUTPUTS[0])
        self.assertIn("    LC_FIELD(llama_batch, n_tokens),\n    LC_FIELD(llama_batch, token),", cpp)
        self.assertIn("#define LC_LLAMA_STRUCTS \\\n    LC_STRUCT(llama_batch, llama_batch_fields), \\\n", cpp)
        mtmd = cpp[cpp.index("#ifdef LLAMA_CANCEL_WITH_MTMD"):]
        self.assertIn("    LC_FIELD(mtmd_gen_inp, state_data),", mtmd)
        self.assertIn("    LC_STRUCT(mtmd_gen_out, mtmd_gen_out_fields)\n#endif\n", mtmd)
        self.assertNotIn("LC_NO_HOLES(llama_batch", cpp)  # llama.cpp's structs have padding

    def test_two_swapped_fields_or_a_new_type_in_llama_h_or_mtmd_h_is_drift(self):
        self.assertEqual(self.synthetic().returncode, 0)
        # The order reaches the three files; a type, the bindings' (the C++ tables hold offsetof alone).
        for rel, old, new, drifted in (
                ("llama.h", "uint32_t n_ctx;                 // text context\n        uint32_t n_batch;",
                 "uint32_t n_batch;\n        uint32_t n_ctx;", OUTPUTS),
                ("llama.h", "uint32_t n_batch;", "int32_t n_batch;", OUTPUTS[1:]),
                ("mtmd.h", "size_t          n_codes;", "uint64_t n_codes;", OUTPUTS[1:])):
            with self.subTest(rel=rel, new=new):
                original = SYNTHETIC_LLAMA if rel == "llama.h" else SYNTHETIC_MTMD
                self.assertIn(old, original)
                self.write(rel, original.replace(old, new))
                r = self.run_gen("--check")
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertEqual(re.findall(r"drift: (\S+) differs", r.stderr), list(drifted), r.stderr)
                self.write(rel, original)
                self.assertEqual(self.run_gen("--check").returncode, 0)

    def test_llama_h_or_mtmd_h_it_cannot_read_stops_it(self):
        self.assertEqual(self.synthetic().returncode, 0)
        for rel, old, new, says in (
                ("llama.h", "struct llama_context_params {", "struct llama_context_parameters {",
                 "llama.h: no definition of struct llama_context_params read"),
                ("llama.h", "int8_t       *  logits;", "int16_t * logits;",
                 "llama.h: struct llama_batch, field `int16_t * logits`: unknown field type `int16_t *`"),
                ("mtmd.h", "const char * state_data;\n    size_t       state_size;",
                 "const void * state_data;\n    size_t       state_size;",
                 "FIELD_KINDS in scripts/gen_layouts.py gives mtmd_gen_inp.state_data kind `ptr` for type "
                 "`const char *`, but its type is `const void *` now")):
            with self.subTest(new=new):
                original = SYNTHETIC_LLAMA if rel == "llama.h" else SYNTHETIC_MTMD
                self.assertIn(old, original)
                self.write(rel, original.replace(old, new))
                r = self.run_gen("--check")
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(says, r.stderr)
                self.write(rel, original)

    def test_no_mtmd_h_skips_the_check_and_stops_a_write(self):
        self.assertEqual(self.synthetic().returncode, 0)
        missing = ["--llama-h", self.path("llama.h"), "--mtmd-h", self.path("no/mtmd.h")]
        r = self.run_gen("--check", headers=missing)
        self.assertEqual(r.returncode, SKIP, r.stderr)
        self.assertIn("skipped: mtmd.h:", r.stderr)
        r = self.run_gen(headers=missing)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("error: mtmd.h:", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
