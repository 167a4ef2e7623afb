#!/usr/bin/env python3
"""The struct layouts a host copies, written once for every copy that needs them.

Reads every `struct llama_cancel_* { ... };` definition of include/llama-cancel.h, and the structs
of llama.cpp's headers the bindings copy (FOREIGN: llama.h's llama_batch, llama_model_params and
llama_context_params; mtmd.h's mtmd_input_text, mtmd_gen_audio_info, mtmd_gen_inp and mtmd_gen_out)
from the installed llama.h and mtmd.h the library is built against (each field's type, name and
array length), and writes, each file marked as generated:

  src/abi/abi_layouts.inc                      the field tables and no-padding checks src/abi/abi.cpp includes
                                           (llama_cancel_struct_size, llama_cancel_field_offset)
  bindings/python/llama_cancel/_layouts.py LAYOUTS, LLAMA_LAYOUTS, MTMD_LAYOUTS: struct -> [(field, kind)],
                                           the ctypes Structures of abi.py, llama.py and mtmd.py
  bindings/node/layouts.js                 the same lists, index.js's koffi structs

A kind is a small language-neutral name for a field type (KINDS below); each binding maps kinds to
its own types in one table. A field type that KINDS does not list stops the script with an error,
so that a new type is given a kind (and a binding type) on purpose rather than guessed.

llama.h and mtmd.h are looked for with --llama-h / --mtmd-h, else in pkg-config's include folder of
llama, /usr/local/include and /usr/include (where the sid root of scripts/dev.sh has them: run
`scripts/dev.sh run python3 scripts/gen_layouts.py` on a host without llama.cpp).

usage: gen_layouts.py [--root DIR] [--llama-h FILE] [--mtmd-h FILE]           regenerate the three files
       gen_layouts.py [--root DIR] [--llama-h FILE] [--mtmd-h FILE] --check   write nothing; exit 1 naming
                                                                              each file that differs (77:
                                                                              no mtmd.h to check against)
"""
import argparse
import os
import re
import subprocess
import sys

HEADER = "include/llama-cancel.h"
OUT_CPP = "src/abi/abi_layouts.inc"
OUT_PY = "bindings/python/llama_cancel/_layouts.py"
OUT_JS = "bindings/node/layouts.js"

# llama.cpp's structs the bindings copy, by header: the library answers llama_cancel_struct_size and
# llama_cancel_field_offset for each (mtmd.h's when built with libmtmd).
FOREIGN = {
    "llama.h": ("llama_batch", "llama_model_params", "llama_context_params"),
    "mtmd.h": ("mtmd_input_text", "mtmd_gen_audio_info", "mtmd_gen_inp", "mtmd_gen_out"),
}

# A field's type as a header spells it (whitespace collapsed, '*' a word of its own) -> its kind.
#   i32 u32 i64 u64 f32 f64 bool: fixed-width numbers and C bool
#   enum: a C enum (an int on every ABI llama.cpp builds for); usize: size_t (llama.h's and mtmd.h's
#         structs only: llama-cancel.h's hold fixed-width types, OWN_REFUSED)
#   ptr: any pointer the bindings pass through untouched (opaque handles, callbacks, user data)
#   i8* i32* f32* i32**: arrays the bindings fill or read (llama_batch's, mtmd_gen_inp's and _out's)
#   str: const char * (a NUL-terminated string)
#   byte: const int8_t * (the caller's cancel byte); bytes: const int8_t * const * (an array of them)
#   char[N]: a fixed char array (ARRAY_KINDS); a binding reads it as a string
KINDS = {
    "int32_t": "i32",
    "uint32_t": "u32",
    "int64_t": "i64",
    "uint64_t": "u64",
    "float": "f32",
    "double": "f64",
    "bool": "bool",
    "llama_token": "i32",
    "llama_pos": "i32",
    "llama_seq_id": "i32",
    "size_t": "usize",
    "enum llama_split_mode": "enum",
    "enum llama_load_mode": "enum",
    "enum llama_lazy_mode": "enum",
    "enum llama_context_type": "enum",
    "enum llama_rope_scaling_type": "enum",
    "enum llama_pooling_type": "enum",
    "enum llama_attention_type": "enum",
    "enum llama_flash_attn_type": "enum",
    "enum ggml_type": "enum",
    "enum mtmd_gen_audio_type": "enum",
    "enum mtmd_gen_process_type": "enum",
    "const char *": "str",
    "const int8_t *": "byte",
    "const int8_t * const *": "bytes",
    "int8_t *": "i8*",
    "int32_t *": "i32*",
    "const int32_t *": "i32*",
    "llama_token *": "i32*",
    "llama_pos *": "i32*",
    "llama_seq_id * *": "i32**",
    "float *": "f32*",
    "const float *": "f32*",
    "void *": "ptr",
    "struct llama_cancel_hook *": "ptr",
    "struct llama_sampler *": "ptr",
    "struct llama_context *": "ptr",
    "struct llama_sampler_seq_config *": "ptr",
    "const struct llama_model_tensor_buft_override *": "ptr",
    "const struct llama_model_kv_override *": "ptr",
    "const struct mtmd_bitmap *": "ptr",
    "ggml_backend_dev_t *": "ptr",
    "ggml_abort_callback": "ptr",
    "ggml_backend_sched_eval_callback": "ptr",
    "llama_progress_callback": "ptr",
    "llama_cancel_token_callback": "ptr",
    "llama_cancel_tts_frame_callback": "ptr",
}
# Fields whose type spelling says less than their use: (struct, field) -> (the type as the header
# spells it, kind). A type that is no longer that spelling stops the script.
FIELD_KINDS = {
    # the streaming state, binary: a plain pointer, never read as a C string
    ("mtmd_gen_inp", "state_data"): ("const char *", "ptr"),
    ("mtmd_gen_out", "state_data"): ("const char *", "ptr"),
}
# Kinds llama-cancel.h's own structs may not use: they hold fixed-width types (no padding, the same
# layout on every 64-bit target).
OWN_REFUSED = {"enum", "usize"}
# Element types allowed in a fixed array field (`char message[256]` -> kind "char[256]").
ARRAY_KINDS = {"char": "char"}

BANNER = f"generated by scripts/gen_layouts.py from {HEADER}, llama.h and mtmd.h; do not edit"
REGEN = "after changing a struct of the header, or for another llama.cpp: python3 scripts/gen_layouts.py"
SKIP = 77  # --check without an mtmd.h to check against (CTest's SKIP_RETURN_CODE)


class LayoutError(Exception):
    pass


class NoHeader(LayoutError):
    pass


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def normalise_type(spelling):
    return " ".join(spelling.replace("*", " * ").split())


def parse_field(source, struct, decl):
    """(name, kind) of one declaration `TYPE NAME` or `TYPE NAME[N]` of `struct` in header `source`."""
    where = f"{source}: struct {struct}, field `{decl}`"
    if any(c in decl for c in ",():{}") or decl.startswith("#"):
        raise LayoutError(f"{where}: only one plain field per declaration is supported "
                          "(no bit-fields, inline function pointers, nested structs, or several names)")
    m = re.fullmatch(r"(?P<type>.*?[\w*])\s*\b(?P<name>[A-Za-z_]\w*)\s*(?:\[\s*(?P<n>\d+)\s*\])?", decl)
    if not m:
        raise LayoutError(f"{where}: cannot read a type and a name")
    ctype, name, n = normalise_type(m.group("type")), m.group("name"), m.group("n")
    if n is not None:
        if ctype not in ARRAY_KINDS:
            raise LayoutError(f"{where}: arrays of `{ctype}` have no kind; add it to ARRAY_KINDS in "
                              "scripts/gen_layouts.py (and to each binding's kind map)")
        return name, f"{ARRAY_KINDS[ctype]}[{int(n)}]"
    if (struct, name) in FIELD_KINDS:
        spelled, kind = FIELD_KINDS[(struct, name)]
        if ctype != spelled:
            raise LayoutError(f"{where}: FIELD_KINDS in scripts/gen_layouts.py gives {struct}.{name} kind `{kind}` "
                              f"for type `{spelled}`, but its type is `{ctype}` now: give it a kind again")
        return name, kind
    if ctype not in KINDS:
        raise LayoutError(f"{where}: unknown field type `{ctype}`; add it to KINDS in scripts/gen_layouts.py "
                          "(and a new kind to each binding's kind map: abi.py's _CTYPES, index.js's KOFFI_TYPES)")
    return name, KINDS[ctype]


def parse_body(source, name, body):
    decls = [" ".join(d.split()) for d in body.split(";")]
    if decls[-1]:
        raise LayoutError(f"{source}: struct {name}: `{decls[-1]}` has no ';'")
    fields = [parse_field(source, name, d) for d in decls[:-1]]
    if not fields:
        raise LayoutError(f"{source}: struct {name} has no fields")
    names = [f for f, _ in fields]
    if len(set(names)) != len(names):
        raise LayoutError(f"{source}: struct {name} names a field twice")
    return fields


def parse_header(text):
    """Ordered {struct name: [(field, kind), ...]} of the header's llama_cancel_* struct definitions."""
    code = strip_comments(text)
    opened = re.findall(r"\bstruct\s+(llama_cancel_\w+)\s*\{", code)
    layouts = {}
    for name, body in re.findall(r"\bstruct\s+(llama_cancel_\w+)\s*\{([^{}]*)\}\s*;", code):
        if name in layouts:
            raise LayoutError(f"{HEADER}: struct {name} is defined twice")
        layouts[name] = parse_body(HEADER, name, body)
        refused = [f"{f} ({k})" for f, k in layouts[name] if k in OWN_REFUSED]
        if refused:
            raise LayoutError(f"{HEADER}: struct {name}: {', '.join(refused)}: the header's structs hold fixed-width "
                              "types only (no enum, no size_t: OWN_REFUSED in scripts/gen_layouts.py)")
    if sorted(opened) != sorted(layouts):
        missed = sorted(set(opened) - set(layouts)) or opened
        raise LayoutError(f"{HEADER}: cannot read the definition of struct {', '.join(missed)} "
                          "(expected `struct NAME { TYPE NAME; ... };` with no nested braces)")
    if not layouts:
        raise LayoutError(f"{HEADER}: no struct llama_cancel_* definitions found")
    return layouts


def parse_foreign(source, text, names):
    """Ordered {struct name: [(field, kind), ...]} of `names` in llama.cpp's header `source`, each
    defined once as `struct NAME { ... };` or `typedef struct NAME { ... } NAME;`."""
    code = strip_comments(text)
    layouts = {}
    for name in names:
        found = re.findall(rf"\bstruct\s+{name}\s*\{{([^{{}}]*)\}}\s*(?:{name}\s*)?;", code)
        if len(found) != 1:
            raise LayoutError(f"{source}: {'no' if not found else 'more than one'} definition of struct {name} "
                              "read (expected `struct NAME { TYPE NAME; ... };` or `typedef struct NAME { ... } NAME;` "
                              "with no nested braces)")
        layouts[name] = parse_body(source, name, found[0])
    return layouts


def gen_tables(out, layouts):
    for name, fields in layouts.items():
        out.append(f"const field_entry {name}_fields[] = {{")
        out += [f"    LC_FIELD({name}, {f})," for f, _ in fields]
        out += ["    LC_END,", "};", ""]


def gen_struct_list(out, macro, layouts):
    out.append(f"#define {macro} \\")
    entries = [f"    LC_STRUCT({name}, {name}_fields)" for name in layouts]
    out += [e + (", \\" if i + 1 < len(entries) else "") for i, e in enumerate(entries)]


def gen_cpp(layouts, llama, mtmd):
    out = [f"// {BANNER}", f"// ({REGEN}).",
           "// Included by src/abi/abi.cpp (and tests/test_abi.cpp) inside an anonymous namespace, after field_entry,",
           "// LC_FIELD, LC_END, LC_STRUCT and, on 64-bit targets, LC_NO_HOLES and LC_SZ; mtmd.h's part only",
           "// with LLAMA_CANCEL_WITH_MTMD, after mtmd.h.", ""]
    gen_tables(out, layouts)
    out.append("// No padding anywhere (between fields or at the end) on 64-bit targets: the sum of the field")
    out.append("// sizes is the struct's size, so a field added to a struct always changes its size.")
    out.append("#ifdef LC_NO_HOLES")
    for name, fields in layouts.items():
        out.append(f"LC_NO_HOLES({name},")
        out += [f"            LC_SZ({name}, {f}){',' if i + 1 < len(fields) else ');'}"
                for i, (f, _) in enumerate(fields)]
    out += ["#endif", "", "// Every llama_cancel_* struct of the header, for abi.cpp's table."]
    gen_struct_list(out, "LC_HEADER_STRUCTS", layouts)
    out += ["", "// llama.h's structs the bindings copy, every field (llama.cpp's layout: padding and all).", ""]
    gen_tables(out, llama)
    gen_struct_list(out, "LC_LLAMA_STRUCTS", llama)
    out += ["", "// mtmd.h's structs the bindings copy, every field, where the library is built with libmtmd.",
            "#ifdef LLAMA_CANCEL_WITH_MTMD", ""]
    gen_tables(out, mtmd)
    gen_struct_list(out, "LC_MTMD_STRUCTS", mtmd)
    out.append("#endif")
    return "\n".join(out) + "\n"


def py_dict(out, var, layouts):
    out.append(f"{var} = {{")
    for name, fields in layouts.items():
        out.append(f'    "{name}": [')
        out += [f'        ("{f}", "{k}"),' for f, k in fields]
        out.append("    ],")
    out.append("}")


def gen_py(layouts, llama, mtmd):
    out = [f"# {BANNER}", f"# ({REGEN}).",
           '"""Each struct a binding copies: its fields in order, as (name, kind). abi.py maps each kind to a',
           "ctypes type (_CTYPES) and builds the Structures from these lists: llama-cancel.h's (LAYOUTS) in",
           'abi.py, llama.h\'s (LLAMA_LAYOUTS) in llama.py, mtmd.h\'s (MTMD_LAYOUTS) in mtmd.py."""', ""]
    py_dict(out, "LAYOUTS", layouts)
    out.append("")
    py_dict(out, "LLAMA_LAYOUTS", llama)
    out.append("")
    py_dict(out, "MTMD_LAYOUTS", mtmd)
    return "\n".join(out) + "\n"


def js_dict(out, var, layouts):
    out.append(f"    {var}: {{")
    for name, fields in layouts.items():
        out.append(f"        {name}: [")
        out += [f"            ['{f}', '{k}']," for f, k in fields]
        out.append("        ],")
    out.append("    },")


def gen_js(layouts, llama, mtmd):
    out = [f"// {BANNER}", f"// ({REGEN}).",
           "// Each struct the binding copies: its fields in order, as [name, kind]: llama-cancel.h's (LAYOUTS),",
           "// llama.h's (LLAMA_LAYOUTS), mtmd.h's (MTMD_LAYOUTS). index.js maps each kind to a koffi type",
           "// (KOFFI_TYPES) and builds the structs from these lists.",
           "'use strict';", "", "module.exports = {"]
    js_dict(out, "LAYOUTS", layouts)
    js_dict(out, "LLAMA_LAYOUTS", llama)
    js_dict(out, "MTMD_LAYOUTS", mtmd)
    out.append("};")
    return "\n".join(out) + "\n"


def include_dirs():
    """Where llama.h and mtmd.h are looked for when not given: pkg-config's include folder of llama,
    /usr/local/include, /usr/include."""
    dirs = []
    try:
        r = subprocess.run(["pkg-config", "--variable=includedir", "llama"], capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip():
            dirs.append(r.stdout.strip())
    except OSError:
        pass
    return dirs + [d for d in ("/usr/local/include", "/usr/include") if d not in dirs]


def find_header(name, given):
    if given:
        if not os.path.isfile(given):
            raise NoHeader(f"{name}: {given} is not a file")
        return given
    dirs = include_dirs()
    for d in dirs:
        if os.path.isfile(os.path.join(d, name)):
            return os.path.join(d, name)
    raise NoHeader(f"{name} not found in {', '.join(dirs)} (--{name.replace('.', '-')} FILE; on a host without "
                   "llama.cpp: scripts/dev.sh run python3 scripts/gen_layouts.py)")


def read_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def generate(root, llama_h, mtmd_h):
    layouts = parse_header(read_text(os.path.join(root, HEADER)))
    llama = parse_foreign("llama.h", read_text(llama_h), FOREIGN["llama.h"])
    mtmd = parse_foreign("mtmd.h", read_text(mtmd_h), FOREIGN["mtmd.h"])
    return {OUT_CPP: gen_cpp(layouts, llama, mtmd), OUT_PY: gen_py(layouts, llama, mtmd),
            OUT_JS: gen_js(layouts, llama, mtmd)}


def read(path):
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return f.read().replace("\r\n", "\n")  # a checkout with CRLF line ends is no drift
    except FileNotFoundError:
        return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    help="the source tree (default: this script's)")
    ap.add_argument("--llama-h", help="llama.cpp's llama.h (default: looked for, see above)")
    ap.add_argument("--mtmd-h", help="llama.cpp's mtmd.h (default: looked for beside llama.h's places)")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 naming each generated file that differs from the headers")
    args = ap.parse_args(argv)
    try:
        llama_h = find_header("llama.h", args.llama_h)
        try:
            mtmd_h = find_header("mtmd.h", args.mtmd_h)
        except NoHeader as e:
            if not args.check:
                raise
            print(f"gen_layouts.py: skipped: {e}: the copies of mtmd.h's structs cannot be checked here",
                  file=sys.stderr)
            return SKIP
        files = generate(args.root, llama_h, mtmd_h)
    except (LayoutError, OSError) as e:
        print(f"gen_layouts.py: error: {e}", file=sys.stderr)
        return 2
    sources = f"{HEADER}, {llama_h} and {mtmd_h}"
    drift = []
    for rel, text in files.items():
        path = os.path.join(args.root, rel)
        current = read(path)
        if current == text:
            continue
        if args.check:
            drift.append(rel)
            why = "is missing" if current is None else "differs from what the headers give"
            print(f"gen_layouts.py: drift: {rel} {why}", file=sys.stderr)
        else:
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                f.write(text)
            print(f"wrote {rel}")
    if drift:
        print(f"gen_layouts.py: {len(drift)} file(s) out of date with {sources}: run python3 scripts/gen_layouts.py "
              "(and never edit them by hand)", file=sys.stderr)
        return 1
    if args.check:
        print(f"gen_layouts.py: {', '.join(files)} match {sources}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
