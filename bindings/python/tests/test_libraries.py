"""How the module finds its libraries: the file names per platform and their order (pure, for
win32, darwin and linux on any machine), and, here on Linux, that every llama.h and ggml function
comes from the library that defines it, opened by its own name, not through llama-cancel's handle
(which Windows' GetProcAddress cannot see through)."""
import ctypes as C
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import llama_cancel
from llama_cancel import libraries

import host


class FileNames(unittest.TestCase):
    def test_windows(self):
        files = llama_cancel.library_files
        self.assertEqual(files("llama-cancel", "win32"), [["llama-cancel.dll", "libllama-cancel.dll"]])
        self.assertEqual(files("llama", "win32"), [["llama.dll", "libllama.dll"]])
        self.assertEqual(files("ggml", "win32"), [["ggml.dll", "libggml.dll"], ["ggml-base.dll", "libggml-base.dll"]])
        self.assertEqual(files("mtmd", "win32"), [["mtmd.dll", "libmtmd.dll"]])

    def test_macos(self):
        files, major = llama_cancel.library_files, llama_cancel.abi.VERSION_MAJOR
        self.assertEqual(files("llama-cancel", "darwin"), [[f"libllama-cancel.{major}.dylib", "libllama-cancel.dylib"]])
        self.assertEqual(files("llama", "darwin"), [["libllama.0.dylib", "libllama.dylib"]])
        self.assertEqual(files("ggml", "darwin"),
                         [["libggml.0.dylib", "libggml.dylib"], ["libggml-base.0.dylib", "libggml-base.dylib"]])
        self.assertEqual(files("mtmd", "darwin"), [["libmtmd.0.dylib", "libmtmd.dylib"]])

    def test_linux(self):
        files, major = llama_cancel.library_files, llama_cancel.abi.VERSION_MAJOR
        self.assertEqual(files("llama-cancel", "linux"), [[f"libllama-cancel.so.{major}", "libllama-cancel.so"]])
        self.assertEqual(files("llama", "linux"), [["libllama.so.0", "libllama.so"]])
        self.assertEqual(files("ggml", "linux"), [["libggml.so.0", "libggml.so"], ["libggml-base.so.0", "libggml-base.so"]])
        self.assertEqual(files("mtmd", "linux"), [["libmtmd.so.0", "libmtmd.so"]])
        self.assertEqual(files("llama", "freebsd14"), files("llama", "linux"), "other ELF systems: sonames")

    def test_order_windows_folder_first(self):
        paths = llama_cancel.candidate_paths(["llama.dll", "libllama.dll"], "win32", r"C:\app\bin")
        self.assertEqual(paths, [r"C:\app\bin\llama.dll", r"C:\app\bin\libllama.dll", "llama.dll", "libllama.dll"])
        self.assertEqual(llama_cancel.candidate_paths(["llama.dll"], "win32", None), ["llama.dll"])

    def test_order_elsewhere_names_first(self):
        for platform, names in (("linux", ["libllama.so.0", "libllama.so"]),
                                ("darwin", ["libllama.0.dylib", "libllama.dylib"])):
            self.assertEqual(llama_cancel.candidate_paths(names, platform, "/opt/lc/lib"),
                             names + ["/opt/lc/lib/" + n for n in names], platform)

    def test_variables(self):
        self.assertEqual(llama_cancel.ENV, {"llama-cancel": "LLAMA_CANCEL_LIBRARY", "llama": "LLAMA_CANCEL_LLAMA_LIBRARY",
                                            "ggml": "LLAMA_CANCEL_GGML_LIBRARY", "mtmd": "LLAMA_CANCEL_MTMD_LIBRARY"})


def real(path):
    return os.path.realpath(path) if path else None


@unittest.skipUnless(sys.platform.startswith("linux"), "Linux library names")
class WhereFunctionsComeFrom(unittest.TestCase):
    def setUp(self):
        self.lib = host.lib()

    def assert_from(self, functions, name, soname):
        fn = getattr(functions, name)
        self.assertEqual(functions.sources[name], soname, f"{name} looked up in {soname}'s own handle")
        where = llama_cancel.file_of(C.cast(fn, C.c_void_p).value)
        self.assertTrue(os.path.basename(real(where)).startswith(soname.rsplit(".", 1)[0]), (name, where))

    def test_llama_functions_come_from_libllama(self):
        self.assertEqual(self.lib.files["llama"], ["libllama.so.0"])
        for name in ("llama_decode", "llama_init_from_model", "llama_memory_seq_pos_max", "llama_get_logits_ith"):
            self.assert_from(self.lib.llama, name, "libllama.so.0")
        # Outside the declared table: the same lookup.
        self.assert_from(self.lib.llama, "llama_model_n_params", "libllama.so.0")

    def test_ggml_functions_come_from_libggml(self):
        self.assertEqual(self.lib.files["ggml"], ["libggml.so.0", "libggml-base.so.0"])
        for name in ("ggml_backend_load_all", "ggml_backend_reg_by_name", "ggml_backend_unload"):
            self.assert_from(self.lib.ggml, name, "libggml.so.0")
        self.assert_from(self.lib.ggml, "ggml_backend_dev_count", "libggml.so.0")
        # Defined in libggml-base: dlsym finds it through libggml's handle too (its dependency),
        # GetProcAddress would not, and the lookup goes on to libggml-base.dll (next test).
        where = llama_cancel.file_of(C.cast(self.lib.ggml.ggml_backend_dev_name, C.c_void_p).value)
        self.assertTrue(os.path.basename(real(where)).startswith("libggml-base.so"), where)

    def test_each_function_from_the_first_library_that_defines_it(self):
        base = C.CDLL("libggml-base.so.0")
        functions = libraries.Functions([base, self.lib._c], {"llama_decode": (C.c_int32, [C.c_void_p, C.c_void_p])})
        self.assertEqual(functions.sources, {"llama_decode": self.lib._c._name}, "libggml-base has no llama_decode")
        functions.ggml_backend_dev_name
        self.assertEqual(functions.sources["ggml_backend_dev_name"], "libggml-base.so.0")
        self.assertEqual(functions.llama_decode.restype, C.c_int32, "declared types stay on the function")
        with self.assertRaisesRegex(AttributeError, "no_such_function: in none of libggml-base.so.0, "):
            functions.no_such_function

    def test_mtmd_functions_come_from_libmtmd(self):
        if not self.lib.has_mtmd:
            self.skipTest("built without libmtmd")
        self.assertEqual(self.lib.files["mtmd"], ["libmtmd.so.0"])
        self.assert_from(self.lib.mtmd, "mtmd_tokenize", "libmtmd.so.0")

    def test_the_cancel_functions_come_from_llama_cancel(self):
        where = llama_cancel.file_of(C.cast(self.lib.llama_cancel_decode, C.c_void_p).value)
        self.assertEqual(real(where), real(self.lib.path))
        self.assertEqual(real(os.path.join(self.lib.folder, os.path.basename(where))), real(self.lib.path))

    def test_the_same_functions_as_llama_cancel_calls(self):
        """The handle opened by name is the copy libllama-cancel linked: same address as through its
        own handle (dlsym searching its dependencies, the lookup this replaces)."""
        through_cancel = libraries.Functions([self.lib._c])
        for name in ("llama_decode", "llama_batch_get_one"):
            self.assertEqual(C.cast(getattr(self.lib.llama, name), C.c_void_p).value,
                             C.cast(getattr(through_cancel, name), C.c_void_p).value, name)

    def test_a_named_file_that_does_not_open_is_an_error(self):
        with self.assertRaisesRegex(OSError, r"\$LLAMA_CANCEL_LLAMA_LIBRARY: /nonexistent/libllama.so"):
            libraries.open_kind("llama", ["llama_decode"], self.lib._c,
                                environ={"LLAMA_CANCEL_LLAMA_LIBRARY": "/nonexistent/libllama.so"})
        none = libraries.open_kind("llama", ["llama_decode"], self.lib._c, platform="linux",
                                   environ={"LLAMA_CANCEL_LLAMA_LIBRARY": ""})
        self.assertEqual([h._name for h in none], ["libllama.so.0"], "an empty variable: the search")

    def test_another_copy_of_libllama_is_refused(self):
        """A second file of libllama (here a copy of the loaded one) defines llama_decode at another
        address: named in the variable, an error; it is never used beside llama-cancel's copy. In a
        child process, which the second copy then occupies."""
        src = libraries.file_of(C.cast(self.lib.llama.llama_decode, C.c_void_p).value)
        with tempfile.TemporaryDirectory() as tmp:
            copy = os.path.join(tmp, "libllama.so.0")
            shutil.copy(real(src), copy)
            code = ("import os, llama_cancel\n"
                    "lib = llama_cancel.load(os.environ['LLAMA_CANCEL_LIBRARY'])\n")
            env = dict(os.environ, LLAMA_CANCEL_LLAMA_LIBRARY=copy)
            out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
            self.assertNotEqual(out.returncode, 0, out.stdout)
            self.assertIn("another copy of llama_", out.stderr)
            self.assertIn(copy, out.stderr)


if __name__ == "__main__":
    unittest.main()
