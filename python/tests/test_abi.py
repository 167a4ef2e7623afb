"""The module's view of the ABI matches the loaded library: version, every struct and field of the
header, and a wrong layout is reported instead of used."""
import ctypes as C
import re
import unittest

import llama_cancel
from llama_cancel import abi

import host


def header_structs(text):
    """struct name -> field names, from the header's `struct X { ... };` bodies."""
    out = {}
    for name, body in re.findall(r"struct (llama_cancel_\w+) \{(.*?)\};", text, re.S):
        body = re.sub(r"//[^\n]*", "", body)
        out[name] = [m.group(1) for m in re.finditer(r"(\w+)\s*(?:\[\d+\])?\s*;", body)]
    return out


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

    def test_library_knows_every_struct_and_field_of_the_header(self):
        structs = header_structs(self.header)
        self.assertIn("llama_cancel_decode_params", structs)
        for name, fields in structs.items():
            self.assertGreater(self.lib.llama_cancel_struct_size(name.encode()), 0, name)
            for field in fields:
                self.assertGreaterEqual(self.lib.llama_cancel_field_offset(name.encode(), field.encode()), 0,
                                        f"{name}.{field} missing from src/abi.cpp")

    def test_library_lists_the_fields_in_the_headers_order(self):
        for name, fields in header_structs(self.header).items():
            listed = []
            while (f := self.lib.llama_cancel_field_name(name.encode(), len(listed))) is not None:
                listed.append(f.decode())
            self.assertEqual(listed, fields, name)

    def test_module_declares_every_struct_with_the_headers_fields(self):
        structs = header_structs(self.header)
        declared = {s.__name__: [f for f, _ in s._fields_] for s in abi.STRUCTS}
        self.assertEqual(declared, structs)

    def test_module_layouts_match(self):
        self.assertEqual(self.lib.abi_problems(), [])
        for s in ("llama_batch", "llama_model_params", "llama_context_params"):
            self.assertGreater(self.lib.llama_cancel_struct_size(s.encode()), 0)

    def test_a_changed_layout_is_reported(self):
        class llama_cancel_decode_params(C.Structure):  # the last field missing: padding keeps the size
            _fields_ = abi.llama_cancel_decode_params._fields_[:-1]
        problems = self.lib._struct_problems(llama_cancel_decode_params, fields=True)
        self.assertTrue(any("not declared here" in p for p in problems), problems)

        class llama_cancel_decode_result(C.Structure):  # the fields after `message` missing
            _fields_ = abi.llama_cancel_decode_result._fields_[:5]
        problems = self.lib._struct_problems(llama_cancel_decode_result, fields=True)
        self.assertTrue(any("bytes in the library" in p for p in problems), problems)
        self.assertEqual(self.lib.llama_cancel_field_name(b"llama_cancel_decode_result", 0), b"status")
        self.assertIsNone(self.lib.llama_cancel_field_name(b"llama_cancel_decode_result", 1000))
        self.assertEqual(self.lib.llama_cancel_struct_size(b"no_such_struct"), 0)
        self.assertEqual(self.lib.llama_cancel_field_offset(b"llama_cancel_decode_params", b"nope"), -1)
        self.assertEqual(self.lib.llama_cancel_struct_size(None), 0)

    def test_status_names(self):
        self.assertEqual(self.lib.llama_cancel_status_str(llama_cancel.CANCELLED), b"cancelled")


if __name__ == "__main__":
    unittest.main()
