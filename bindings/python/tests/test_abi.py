"""The module's view of the ABI matches the loaded library: version, every struct and field of the
header, no padding holes, every field of each copied llama.h and mtmd.h struct, and a wrong layout
is reported instead of used."""
import ctypes as C
import os
import re
import unittest
from unittest import mock

import llama_cancel
from llama_cancel import abi, llama, mtmd

import host


def header_structs(text):
    """struct name -> field names, from the header's `struct X { ... };` bodies."""
    out = {}
    for name, body in re.findall(r"struct (llama_cancel_\w+) \{(.*?)\};", text, re.S):
        body = re.sub(r"//[^\n]*", "", body)
        out[name] = [m.group(1) for m in re.finditer(r"(\w+)\s*(?:\[\d+\])?\s*;", body)]
    return out


def header_functions(text):
    """The names the header declares with LLAMA_CANCEL_API (tests/api_names.py's parse)."""
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    return re.findall(r"LLAMA_CANCEL_API\s+[^;(]*?\b(llama_cancel_\w+)\s*\(", body)


def swapped(s, a, b):
    """A copy of ctypes Structure `s` (same name) with fields `a` and `b` named the other way round."""
    fields = [(b if f == a else a if f == b else f, t) for f, t in s._fields_]
    return type(s.__name__, (C.Structure,), {"_fields_": fields})


class Abi(unittest.TestCase):
    def setUp(self):
        self.lib = host.lib()
        with open(host.env("LLAMA_CANCEL_HEADER")) as f:
            self.header = f.read()

    def test_version_is_the_headers(self):
        want = [int(re.search(rf"#define LLAMA_CANCEL_VERSION_{p} (\d+)", self.header).group(1))
                for p in ("MAJOR", "MINOR", "PATCH")]
        self.assertEqual(list(self.lib.version()), want)
        self.assertEqual(llama_cancel.__version__, "%d.%d.%d" % tuple(want))
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproject.toml")) as f:
            self.assertIn('\nversion = "%d.%d.%d"' % tuple(want), f.read(), "bindings/python/pyproject.toml's version")

    def test_library_knows_every_struct_and_field_of_the_header(self):
        structs = header_structs(self.header)
        self.assertIn("llama_cancel_decode_params", structs)
        for name, fields in structs.items():
            self.assertGreater(self.lib.llama_cancel_struct_size(name.encode()), 0, name)
            for field in fields:
                self.assertGreaterEqual(self.lib.llama_cancel_field_offset(name.encode(), field.encode()), 0,
                                        f"{name}.{field} missing from src/abi/abi.cpp")

    def test_library_structs_have_no_padding_holes(self):
        """In the header's order each field starts where the one before it ends, and the last ends
        at the struct's size: size and offsets are then the whole check (a bounded loop per struct)."""
        declared = {s.__name__: s for s in abi.STRUCTS}
        for name, fields in header_structs(self.header).items():
            s, at = declared[name], 0
            for field in fields:
                self.assertEqual(self.lib.llama_cancel_field_offset(name.encode(), field.encode()), at,
                                 f"{name}.{field}: a hole before it, or out of the header's order")
                at += getattr(s, field).size
            self.assertEqual(self.lib.llama_cancel_struct_size(name.encode()), at, f"{name}: padding at its end")

    def test_module_declares_every_struct_with_the_headers_fields(self):
        structs = header_structs(self.header)
        declared = {s.__name__: [f for f, _ in s._fields_] for s in abi.STRUCTS}
        self.assertEqual(declared, structs)

    def test_module_declares_every_function_of_the_header(self):
        names = header_functions(self.header)
        self.assertIn("llama_cancel_tts_generate", names)
        self.assertEqual(sorted(abi.prototypes(llama)), sorted(names))
        for name in names:  # each one found in the library, its argument types declared
            self.assertIsNotNone(getattr(self.lib, name).argtypes, name)

    def test_module_layouts_match(self):
        self.assertEqual(self.lib.abi_problems(), [])
        for s in ("llama_batch", "llama_model_params", "llama_context_params"):
            self.assertGreater(self.lib.llama_cancel_struct_size(s.encode()), 0)

    def test_a_changed_layout_is_reported(self):
        fields = abi.llama_cancel_decode_params._fields_

        class llama_cancel_decode_params(C.Structure):  # the first field missing: every offset moves
            _fields_ = fields[1:]
        problems = self.lib._struct_problems(llama_cancel_decode_params)
        self.assertTrue(any("llama_cancel_decode_params.hook: offset" in p for p in problems), problems)
        self.assertTrue(any("bytes in the library" in p for p in problems), problems)

        class llama_cancel_decode_params(C.Structure):  # the last field missing: tail padding keeps the size
            _fields_ = fields[:-1]
        self.assertEqual(C.sizeof(llama_cancel_decode_params), C.sizeof(abi.llama_cancel_decode_params))
        problems = self.lib._struct_problems(llama_cancel_decode_params)
        self.assertTrue(any("fields declared here end at byte 44" in p for p in problems), problems)

        class llama_cancel_seq_result(C.Structure):  # a field narrowed (int8 `cancelled`): same size and offsets
            _fields_ = abi.llama_cancel_seq_result._fields_[:2] + [("cancelled", C.c_int8)]
        self.assertEqual(C.sizeof(llama_cancel_seq_result), C.sizeof(abi.llama_cancel_seq_result))
        problems = self.lib._struct_problems(llama_cancel_seq_result)
        self.assertTrue(any("fields declared here end at byte 9" in p for p in problems), problems)

    def load_with(self, module, struct):
        """The AbiMismatch message of a fresh load with `struct` in place of its namesake in `module`'s
        STRUCTS (llama.py's or mtmd.py's)."""
        copies = tuple(struct if s.__name__ == struct.__name__ else s for s in module.STRUCTS)
        self.assertNotEqual(copies, module.STRUCTS, struct.__name__)
        with mock.patch.object(module, "STRUCTS", copies):
            with self.assertRaises(llama_cancel.AbiMismatch) as caught:
                llama_cancel.Library(self.lib.path)
        return str(caught.exception)

    def test_two_swapped_fields_of_a_llama_h_struct_fail_load(self):
        """Two fields of one size swapped in a copy of llama.h's structs keep its size: load() names
        each field (a size-only check passed them)."""
        for s, a, b in ((llama.llama_context_params, "n_ctx", "n_batch"), (llama.llama_batch, "token", "embd")):
            with self.subTest(struct=s.__name__):
                copy = swapped(s, a, b)
                self.assertEqual(C.sizeof(copy), C.sizeof(s))
                at_a, at_b = getattr(s, a).offset, getattr(s, b).offset
                message = self.load_with(llama, copy)
                self.assertIn(f"{s.__name__}.{a}: offset {at_a} in the library, {at_b} here", message)
                self.assertIn(f"{s.__name__}.{b}: offset {at_b} in the library, {at_a} here", message)
                self.assertNotIn("bytes in the library", message)

    def test_two_swapped_fields_of_an_mtmd_struct_fail_load(self):
        if not self.lib.has_mtmd:
            self.skipTest("the library is built without libmtmd: mtmd.h's structs are not checked")
        copy = swapped(mtmd.mtmd_gen_out, "n_codes", "n_feats")  # two size_t
        self.assertEqual(C.sizeof(copy), C.sizeof(mtmd.mtmd_gen_out))
        at_codes, at_feats = mtmd.mtmd_gen_out.n_codes.offset, mtmd.mtmd_gen_out.n_feats.offset
        message = self.load_with(mtmd, copy)
        self.assertIn(f"mtmd_gen_out.n_codes: offset {at_codes} in the library, {at_feats} here", message)
        self.assertIn(f"mtmd_gen_out.n_feats: offset {at_feats} in the library, {at_codes} here", message)

    def test_load_checks_every_field_of_every_copied_struct(self):
        """abi_problems() asks the library for the size of every struct the module copies and the
        offset of each of its fields: llama-cancel.h's, llama.h's, and mtmd.h's with libmtmd."""
        asked_sizes, asked_offsets = set(), set()
        size, offset = self.lib._c.llama_cancel_struct_size, self.lib._c.llama_cancel_field_offset

        def record_size(name):
            asked_sizes.add(name.decode())
            return size(name)

        def record_offset(name, field):
            asked_offsets.add((name.decode(), field.decode()))
            return offset(name, field)
        with mock.patch.object(self.lib._c, "llama_cancel_struct_size", record_size), \
                mock.patch.object(self.lib._c, "llama_cancel_field_offset", record_offset):
            self.assertEqual(self.lib.abi_problems(), [])
        structs = abi.STRUCTS + llama.STRUCTS + (mtmd.STRUCTS if self.lib.has_mtmd else ())
        self.assertEqual(asked_sizes, {s.__name__ for s in structs})
        self.assertEqual(asked_offsets, {(s.__name__, f) for s in structs for f, _ in s._fields_})
        self.assertIn(("llama_context_params", "cb_eval"), asked_offsets)

    def test_library_answers_every_copied_llama_and_mtmd_field(self):
        """The library knows each field of llama.h's and (with libmtmd) mtmd.h's structs as copied
        here; without libmtmd it knows no mtmd.h struct."""
        for s in llama.STRUCTS + mtmd.STRUCTS:
            known = s in llama.STRUCTS or self.lib.has_mtmd
            name = s.__name__.encode()
            self.assertEqual(self.lib.llama_cancel_struct_size(name), C.sizeof(s) if known else 0, s.__name__)
            for field, _ in s._fields_:
                self.assertEqual(self.lib.llama_cancel_field_offset(name, field.encode()),
                                 getattr(s, field).offset if known else -1, f"{s.__name__}.{field}")

    def test_unknown_names_answer_zero_and_minus_one(self):
        self.assertEqual(self.lib.llama_cancel_struct_size(b"no_such_struct"), 0)
        self.assertEqual(self.lib.llama_cancel_field_offset(b"llama_cancel_decode_params", b"nope"), -1)
        self.assertEqual(self.lib.llama_cancel_struct_size(None), 0)

    def test_an_older_or_newer_major_is_refused(self):
        v = self.lib._c.llama_cancel_version
        for fake, ok in ((abi.VERSION_MAJOR * 10000 + abi.VERSION_MINOR * 100, True),
                         (abi.VERSION_MAJOR * 10000 + (abi.VERSION_MINOR + 1) * 100, True),
                         ((abi.VERSION_MAJOR + 1) * 10000, False), ((abi.VERSION_MAJOR - 1) * 10000 + 9999, False)):
            self.lib._c.llama_cancel_version = lambda: fake  # noqa: B023 (used at once)
            try:
                problems = [p for p in self.lib.abi_problems() if p.startswith("library version")]
            finally:
                self.lib._c.llama_cancel_version = v
            self.assertEqual(problems == [], ok, (fake, problems))

    def test_reach_constants_are_the_headers(self):
        want = {name: int(v) for name, v in re.findall(r"\bLLAMA_CANCEL_REACH_(\w+)\s*=\s*(\d+)", self.header)}
        self.assertEqual(list(want), ["GRAPH", "CPU", "CALLS"], "the parse")
        self.assertEqual({name: getattr(llama_cancel, "REACH_" + name) for name in want}, want)
        self.assertEqual([llama_cancel.REACH_NAMES[v] for v in want.values()], [n.lower() for n in want])

    def test_status_names(self):
        self.assertEqual(self.lib.llama_cancel_status_str(llama_cancel.CANCELLED), b"cancelled")


if __name__ == "__main__":
    unittest.main()
