# What proves the library builds and runs the way llamadart-native's platforms build it (issue 23):
# a mingw-w64 cross build for Windows, a clang warnings check, a host shaped like llamadart-native's
# (Release, IPO, static inside its one library, an FFI binding every name), and the registry rule
# that decides where the eval callbacks place checkpoints (src/checkpoints/abort_reach.h).

# The header's exported functions, for the checks below (tests/api_names.py parses the header).
set(LLAMA_CANCEL_HEADER ${PROJECT_SOURCE_DIR}/include/llama-cancel.h)

# Windows: the library cross-built with mingw-w64, warnings as errors, linked as a DLL against
# import libraries of the llama.cpp functions Debian's libraries export (tests/mingw_build.sh). It
# needs the cross compiler and binutils (scripts/dev.sh installs them into its root) and llama.cpp
# from its installed package (the ELF libraries the import libraries are made from).
find_program(MINGW_CXX x86_64-w64-mingw32-g++)
find_program(MINGW_DLLTOOL x86_64-w64-mingw32-dlltool)
find_program(MINGW_OBJDUMP x86_64-w64-mingw32-objdump)
if(MINGW_CXX AND MINGW_DLLTOOL AND MINGW_OBJDUMP AND GGML_LIBRARY AND GGML_BASE_LIBRARY AND LLAMA_INCLUDE_DIR)
    set(mingw_mtmd "")
    if(LLAMA_CANCEL_MTMD AND EXISTS "${MTMD_LIBRARY}")
        set(mingw_mtmd ${MTMD_LIBRARY})
    endif()
    add_test(NAME mingw_build
        COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/mingw_build.sh ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/mingw_build
            "${LLAMA_INCLUDE_DIR};${GGML_INCLUDE_DIR}" $<TARGET_FILE:llama> ${GGML_BASE_LIBRARY} ${GGML_LIBRARY} "${mingw_mtmd}")
    set_tests_properties(mingw_build PROPERTIES TIMEOUT 900)
else()
    message(STATUS "llama-cancel tests: no mingw_build (needs x86_64-w64-mingw32-g++, -dlltool, -objdump "
        "and an installed llama.cpp package)")
endif()

# A second compiler's warnings: every source of the library with clang++ -Wall -Wextra -Wpedantic
# -Werror (llama.cpp's headers as system headers), and the header alone as C11, as C hosts read it.
find_program(CLANGXX clang++)
if(CLANGXX)
    file(GLOB_RECURSE library_sources ${PROJECT_SOURCE_DIR}/src/*.cpp)
    set(clang_warnings -Wall -Wextra -Wpedantic -Werror)
    # The compiler's own folders stay out: -isystem /usr/include would break libstdc++'s include_next.
    set(llama_include_dirs ${LLAMA_INCLUDE_DIR} ${GGML_INCLUDE_DIR} ${MTMD_INCLUDE_DIR})
    list(REMOVE_DUPLICATES llama_include_dirs)
    list(REMOVE_ITEM llama_include_dirs ${CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES} "")
    set(llama_system_includes "")
    foreach(dir ${llama_include_dirs})
        list(APPEND llama_system_includes -isystem ${dir})
    endforeach()
    add_test(NAME clang_warnings
        COMMAND ${CLANGXX} -std=c++17 -fsyntax-only ${clang_warnings} -DLLAMA_CANCEL_SHARED -DLLAMA_CANCEL_BUILD
            -DLLAMA_CANCEL_WITH_MTMD -I${PROJECT_SOURCE_DIR}/include -I${PROJECT_SOURCE_DIR}/src
            ${llama_system_includes} ${library_sources}
    )
    add_test(NAME clang_warnings_c_header
        COMMAND ${CLANGXX} -x c -std=c11 -fsyntax-only ${clang_warnings} ${llama_system_includes} ${LLAMA_CANCEL_HEADER})
endif()

# llamadart-native's shape: Release with IPO, llama-cancel static inside the host's one library, an
# FFI loader (C, dlopen/dlsym) that binds every exported name and stops a decode through them.
add_test(NAME llamadart_consumer
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/llamadart_consumer.sh ${PROJECT_SOURCE_DIR}
        ${CMAKE_CURRENT_BINARY_DIR}/llamadart_consumer ${TINY_MODEL})
set_tests_properties(llamadart_consumer PROPERTIES FIXTURES_REQUIRED models TIMEOUT 900)

# The registry rule (src/checkpoints/abort_reach.h, header-only, built into the test): the real registries'
# answers, abort_reach with a test double, and end to end with a hook on cpu, blas and vulkan. The
# registries this build must find are named, so that a missing module fails the test.
set(abort_reach_expect "")
llama_cancel_has_backend(rpc rpc_module)
llama_cancel_has_backend(blas blas_module)
foreach(registry Vulkan RPC BLAS)
    if((registry STREQUAL "Vulkan" AND HAVE_VULKAN) OR (registry STREQUAL "RPC" AND rpc_module)
       OR (registry STREQUAL "BLAS" AND blas_module))
        list(APPEND abort_reach_expect ${registry})
    endif()
endforeach()
string(REPLACE ";" "," abort_reach_expect "${abort_reach_expect}")
set(abort_reach_filter_cpu "Registries.*:AbortReachDouble.ClaimedRegistry*:AbortReachDouble.NodeWithout*:EndToEnd.*")
set(abort_reach_filter_blas "AbortReachDouble.Blas*:EndToEnd.*")
set(abort_reach_filter_vulkan "AbortReachDouble.HostMemory*:EndToEnd.*")
set(abort_reach_program SOURCES test_abort_reach.cpp NO_FIXTURES
    INCLUDES ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include LINK llama-cancel llama)
foreach(setup cpu blas vulkan)
    if(NOT setup STREQUAL "cpu" AND NOT setup IN_LIST BACKEND_SETUPS)
        continue()
    endif()
    llama_cancel_test(NAME test_abort_reach_${setup} TARGET test_abort_reach ${abort_reach_program}
        FIXTURES models ARGS --gtest_filter=${abort_reach_filter_${setup}}
        ENV "LLAMA_CANCEL_BACKEND=${setup}" "LLAMA_CANCEL_SMALL_MODEL=${SMALL_MODEL}"
            "LLAMA_CANCEL_EXPECT_REGISTRIES=${abort_reach_expect}" "GGML_VK_VISIBLE_DEVICES=0")
    set(abort_reach_program "")
endforeach()
