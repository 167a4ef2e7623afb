"""Where the module finds libllama-cancel and the llama.cpp libraries whose functions it declares
beside it (llama.h in libllama, ggml-backend.h in libggml, mtmd.h in libmtmd), and from which file
each function comes.

Each function is looked up in the library that defines it, opened by its own name: Windows'
GetProcAddress finds only a DLL's own exports, never what the DLL imports from another one, so a
lookup of llama_decode through llama-cancel.dll's handle fails there (dlsym on Linux and macOS
searches the handle's dependencies too, which the older lookup relied on).

Per library kind ("llama", "ggml", "mtmd"), in order:
  1. $LLAMA_CANCEL_LLAMA_LIBRARY, $LLAMA_CANCEL_GGML_LIBRARY, $LLAMA_CANCEL_MTMD_LIBRARY: the files
     (os.pathsep-separated) to open, and only those: one that does not open is an error.
  2. Else the platform's file names (library_files()), on Windows first in the folder of the loaded
     llama-cancel DLL, then by name; elsewhere by name (the soname of what libllama-cancel linked:
     the loader hands back the copy already loaded), then in that folder.
  3. Last, llama-cancel's own handle: a host library that links llama-cancel and llama.cpp
     statically exports both, and on Linux and macOS dlsym reaches its dependencies through it.
A file that defines one of the kind's functions at another address than llama-cancel's handle
gives is another copy of llama.cpp than the one llama-cancel calls, and is not used.

The name lists and their order are pure functions of the platform (library_files(),
candidate_paths()), tested for win32, darwin and linux on any machine."""
import ctypes as C
import ntpath
import os
import posixpath
import sys

from . import abi

# Environment variable per library kind: a path (or os.pathsep-separated paths) that replaces the search.
ENV = {
    "llama-cancel": "LLAMA_CANCEL_LIBRARY",
    "llama": "LLAMA_CANCEL_LLAMA_LIBRARY",
    "ggml": "LLAMA_CANCEL_GGML_LIBRARY",
    "mtmd": "LLAMA_CANCEL_MTMD_LIBRARY",
}

# The files of each kind, by stem: ggml's backend loader (ggml_backend_load_all, ...) is in libggml,
# the core and the device API in libggml-base; a function is taken from the first that has it.
_STEMS = {"llama-cancel": ("llama-cancel",), "llama": ("llama",), "ggml": ("ggml", "ggml-base"), "mtmd": ("mtmd",)}


def _family(platform):
    if platform == "win32":
        return "win32"
    if platform == "darwin":
        return "darwin"
    return "linux"  # Linux, the BSDs, Android: ELF shared objects with sonames


def library_files(kind, platform=None):
    """The file names the loader is asked for, per file of `kind` ("llama-cancel", "llama", "ggml",
    "mtmd"): a list with one list of alternative names per file (ggml: libggml, then libggml-base),
    for `platform` (a sys.platform value; default this one). Pure: nothing is opened."""
    family = _family(platform or sys.platform)
    out = []
    for stem in _STEMS[kind]:
        # The SOVERSION: llama-cancel's MAJOR; llama.cpp's libraries (Debian's, upstream's CMake) 0.
        v = abi.VERSION_MAJOR if kind == "llama-cancel" else 0
        if family == "win32":  # MSVC builds name it llama.dll, mingw-w64 ones libllama.dll
            out.append([f"{stem}.dll", f"lib{stem}.dll"])
        elif family == "darwin":
            out.append([f"lib{stem}.{v}.dylib", f"lib{stem}.dylib"])
        else:
            out.append([f"lib{stem}.so.{v}", f"lib{stem}.so"])
    return out


def candidate_paths(names, platform=None, folder=None):
    """What is opened for one file, in order, given its alternative `names` and the folder of the
    loaded llama-cancel (None: unknown): on Windows each name in that folder first, then each name
    alone (the DLL search); elsewhere the names alone first, then in that folder. Pure."""
    family = _family(platform or sys.platform)
    join = ntpath.join if family == "win32" else posixpath.join
    beside = [join(folder, n) for n in names] if folder else []
    return beside + list(names) if family == "win32" else list(names) + beside


def file_of(address):
    """The file the code at `address` (a function's address) was loaded from, or None."""
    if not address:
        return None
    try:
        if _family(sys.platform) == "win32":
            k32 = C.WinDLL("kernel32", use_last_error=True)
            module = C.c_void_p()
            # GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT
            if not k32.GetModuleHandleExW(6, C.c_void_p(address), C.byref(module)):
                return None
            buf = C.create_unicode_buffer(32768)
            n = k32.GetModuleFileNameW(module, buf, len(buf))
            return buf.value if n else None

        class Dl_info(C.Structure):
            _fields_ = [("dli_fname", C.c_char_p), ("dli_fbase", C.c_void_p), ("dli_sname", C.c_char_p),
                        ("dli_saddr", C.c_void_p)]
        dladdr = C.CDLL(None).dladdr
        dladdr.restype, dladdr.argtypes = C.c_int, [C.c_void_p, C.POINTER(Dl_info)]
        info = Dl_info()
        if not dladdr(address, C.byref(info)) or not info.dli_fname:
            return None
        return os.fsdecode(info.dli_fname)
    except (OSError, AttributeError):
        return None


def address_in(handle, name):
    """The address of function `name` in the library `handle` (a ctypes CDLL), or None."""
    try:
        return C.cast(handle[name], C.c_void_p).value
    except AttributeError:
        return None


def open_kind(kind, names, cancel, folder=None, platform=None, environ=None):
    """Opens the files of `kind` as the module docstring says: a list of CDLL handles, possibly
    empty (then every function comes from `cancel`, llama-cancel's handle). `names`: the functions
    this module declares for the kind, used to tell another copy of llama.cpp from the one
    llama-cancel calls. Raises OSError for a file named in the kind's variable that does not open or
    is another copy."""
    environ = os.environ if environ is None else environ
    override = environ.get(ENV[kind])
    if override:
        files = [[p] for p in override.split(os.pathsep) if p]
    else:
        files = [candidate_paths(alts, platform, folder) for alts in library_files(kind, platform)]
    handles, errors = [], []
    for paths in files:
        for path in paths:
            try:
                handle = C.CDLL(path)
            except OSError as e:
                errors.append(f"{path}: {e}")
                continue
            other = _other_copy(handle, cancel, names)
            if other:
                errors.append(f"{path}: {other}")
                continue
            handles.append(handle)
            break
        else:
            if override:
                raise OSError(f"${ENV[kind]}: " + "; ".join(errors))
    return handles


def _other_copy(handle, cancel, names):
    """Why `handle` is not the copy llama-cancel calls (None when it is, or when nothing tells)."""
    for name in names:
        mine = address_in(handle, name)
        if mine is None:
            continue
        theirs = address_in(cancel, name)
        if theirs is not None and theirs != mine:
            return (f"another copy of {name} than llama-cancel's ({file_of(mine)} against "
                    f"{file_of(theirs)}): not used")
        return None
    return None


class Functions:
    """C functions by name, each taken from the first of `handles` that defines it, with the
    argument and result types of `table` (name -> (restype, argtypes)) declared. sources[name]: the
    name the defining library was opened by. A name outside the table resolves the same way."""

    def __init__(self, handles, table=None):
        self._handles = list(handles)
        self.sources = {}
        for name, (restype, argtypes) in (table or {}).items():
            fn = getattr(self, name)
            fn.restype, fn.argtypes = restype, argtypes

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        for handle in self._handles:
            try:
                fn = handle[name]
            except AttributeError:
                continue
            self.sources[name] = handle._name
            setattr(self, name, fn)
            return fn
        raise AttributeError(f"{name}: in none of {', '.join(str(h._name) for h in self._handles)}")
