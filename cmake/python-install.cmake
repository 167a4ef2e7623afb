# The Python module (bindings/python/llama_cancel, pure ctypes), installed to LLAMA_CANCEL_PYTHON_INSTALL_DIR
# with a generated _location.py that names the library relative to the installed package, so that
# `llama_cancel.load()` finds it from any prefix. Included by the top-level CMakeLists.txt.
if(LLAMA_CANCEL_STATIC)
    return() # nothing to load: the host's own library carries the symbols (llama_cancel.load(path))
endif()
set(PY_PACKAGE_DIR ${LLAMA_CANCEL_PYTHON_INSTALL_DIR}/llama_cancel)
if(IS_ABSOLUTE "${PY_PACKAGE_DIR}")
    file(RELATIVE_PATH PY_TO_LIBDIR "${PY_PACKAGE_DIR}" "${CMAKE_INSTALL_FULL_LIBDIR}")
else()
    file(RELATIVE_PATH PY_TO_LIBDIR "/prefix/${PY_PACKAGE_DIR}" "/prefix/${CMAKE_INSTALL_LIBDIR}")
endif()
file(GENERATE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/python/_location.py CONTENT
"# Written by cmake --install: where libllama-cancel lies relative to this package.
LIBRARY = \"${PY_TO_LIBDIR}/$<TARGET_SONAME_FILE_NAME:llama-cancel>\"
")
install(FILES
    bindings/python/llama_cancel/__init__.py
    bindings/python/llama_cancel/_layouts.py
    bindings/python/llama_cancel/abi.py
    bindings/python/llama_cancel/libraries.py
    bindings/python/llama_cancel/llama.py
    bindings/python/llama_cancel/mtmd.py
    bindings/python/llama_cancel/tts.py
    ${CMAKE_CURRENT_BINARY_DIR}/python/_location.py
    DESTINATION ${PY_PACKAGE_DIR})
