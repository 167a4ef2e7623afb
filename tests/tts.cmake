# Text-to-speech (test_tts.cpp, issue 32): the two pipelines libmtmd 0.7.0 generates audio with,
# each a tiny pair written by scripts/make_tts.py (Qwen3-TTS: talker + code predictor + code2wav;
# Pocket-TTS: backbone + flow net + mimi decoder), on the CPU, on Vulkan (llvmpipe) and over RPC.
set(TTS_QWEN3_MODEL ${MODELS_DIR}/tts-qwen3tts-tiny.gguf)
set(TTS_QWEN3_MMPROJ ${MODELS_DIR}/mmproj-qwen3tts-tiny.gguf)
set(TTS_POCKET_MODEL ${MODELS_DIR}/tts-pockettts-tiny.gguf)
set(TTS_POCKET_MMPROJ ${MODELS_DIR}/mmproj-pockettts-tiny.gguf)
add_test(NAME make_tts_models
    COMMAND sh -c "${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/make_tts.py --pipeline qwen3tts --model ${TTS_QWEN3_MODEL} --mmproj ${TTS_QWEN3_MMPROJ} && ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/make_tts.py --pipeline pockettts --model ${TTS_POCKET_MODEL} --mmproj ${TTS_POCKET_MMPROJ}")
set_tests_properties(make_tts_models PROPERTIES FIXTURES_SETUP tts_models)
set(tts_program SOURCES test_tts.cpp INCLUDES ${MTMD_INCLUDE_DIR} LINK ${MTMD_LIBRARY})
foreach(pipeline qwen3tts pockettts)
    set(filter "")
    set(labels "")
    if(pipeline STREQUAL "qwen3tts")
        set(model ${TTS_QWEN3_MODEL})
        set(mmproj ${TTS_QWEN3_MMPROJ})
        set(filter ARGS --gtest_filter=-Tts.ChunkBoundaryIsAResumePoint) # one text chunk: Pocket-TTS's test
    else()
        set(model ${TTS_POCKET_MODEL})
        set(mmproj ${TTS_POCKET_MMPROJ})
        # codebook 0 and its suppressed tokens: Qwen3-TTS's tests (Pocket-TTS samples no token)
        set(filter ARGS --gtest_filter=-Tts.Codebook0KeepsToTheCodesTheModelAllows:Tts.ACodeCode2WavWouldRefuseIsAnErrorThatKeepsTheFramesBefore)
    endif()
    foreach(backend cpu vulkan rpc1)
        if(NOT backend STREQUAL "cpu" AND NOT backend IN_LIST BACKEND_SETUPS)
            continue()
        endif()
        llama_cancel_backend_variant(${backend} suffix serial)
        set(leaks "")
        if(backend STREQUAL "cpu")
            # The sanitizer build runs the CPU ones (scripts/dev.sh) for ASan's and UBSan's memory and
            # undefined-behaviour checks, without LeakSanitizer: with libmtmd loaded, 289 bytes
            # allocated in a ggml backend module unloaded at exit are reported ("<unknown module>").
            set(labels LABELS asan)
            set(leaks "ASAN_OPTIONS=detect_leaks=0")
        endif()
        llama_cancel_test(NAME test_tts_${pipeline}${suffix} TARGET test_tts ${tts_program}
            FIXTURES tts_models ${serial} ${filter} ${labels}
            ENV "LLAMA_CANCEL_TTS_MODEL=${model}" "LLAMA_CANCEL_TTS_MMPROJ=${mmproj}"
                "LLAMA_CANCEL_BACKEND=${backend}" "GGML_VK_VISIBLE_DEVICES=0" "LLAMA_CANCEL_RPC_SERVER=${GGML_RPC_SERVER}"
                ${leaks})
        set(tts_program "")
        set(labels "")
    endforeach()
endforeach()

# The bindings' tests run the same cases on both tiny pairs, one after the other: Qwen3-TTS in
# LLAMA_CANCEL_TTS_MODEL / _MMPROJ, Pocket-TTS in LLAMA_CANCEL_TTS_POCKET_MODEL / _MMPROJ.
set(tts_binding_env "LLAMA_CANCEL_TTS_MODEL=${TTS_QWEN3_MODEL}" "LLAMA_CANCEL_TTS_MMPROJ=${TTS_QWEN3_MMPROJ}"
    "LLAMA_CANCEL_TTS_POCKET_MODEL=${TTS_POCKET_MODEL}" "LLAMA_CANCEL_TTS_POCKET_MMPROJ=${TTS_POCKET_MMPROJ}")
# The Python module's Tts on each pair, on the CPU: a worker thread stopped from the main thread
# inside a clip graph and after a reported frame, resumed to the uninterrupted run's PCM bit for
# bit; partial PCM and flush; bad input; on Pocket-TTS also a voiced two-chunk text stopped from the
# main thread inside its second chunk and resumed bit for bit.
add_test(NAME python_module_tts
    COMMAND ${Python3_EXECUTABLE} -m pytest -v -s ${PROJECT_SOURCE_DIR}/bindings/python/tests/test_tts.py -p no:cacheprovider)
set_tests_properties(python_module_tts PROPERTIES FIXTURES_REQUIRED tts_models SKIP_RETURN_CODE 77
    ENVIRONMENT "${PYTHON_TEST_ENV};${tts_binding_env}")
# The Node binding's Tts on the same pairs (test/mtmd/tts.test.js): generateAsync on koffi's worker
# stopped from the main thread inside a clip graph and from a JS onFrame callback, each resumed bit
# for bit; partial PCM and flush; bad input; on Pocket-TTS also the voiced two-chunk text.
if(NODE_EXECUTABLE)
    add_test(NAME node_binding_tts
        COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/node_binding.sh ${NODE_EXECUTABLE} ${PROJECT_SOURCE_DIR}/bindings/node
            test/mtmd/tts.test.js)
    set_tests_properties(node_binding_tts PROPERTIES FIXTURES_REQUIRED tts_models SKIP_RETURN_CODE 77
        ENVIRONMENT "LLAMA_CANCEL_LIBRARY=$<TARGET_FILE:llama-cancel>;LLAMA_CANCEL_PROBE=$<TARGET_FILE:ffi_probe>;${tts_binding_env}")
endif()

# The CLI (`llama-cancel tts`) on the tiny Qwen3-TTS pair: a whole run, bad input, and Ctrl-C typed
# into a terminal (tmux) during a long generation: the WAV of the audio so far, exit status 130.
find_program(TMUX tmux)
if(TMUX)
    add_test(NAME cli_tts COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli_tts.sh $<TARGET_FILE:llama-cancel-cli>
        ${TTS_QWEN3_MODEL} ${TTS_QWEN3_MMPROJ} ${PROJECT_SOURCE_DIR}/scripts)
    set_tests_properties(cli_tts PROPERTIES FIXTURES_REQUIRED tts_models RUN_SERIAL ON TIMEOUT 600)
endif()

# `llama-cancel-bench bench-tts` on the tiny pairs of both pipelines (CPU): each row's JSON well formed,
# every run a latency or finished first; no timing asserted.
add_test(NAME bench_tts_smoke
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/bench_tts_smoke.py $<TARGET_FILE:llama-cancel-bench>
        ${TTS_QWEN3_MODEL} ${TTS_QWEN3_MMPROJ} ${TTS_POCKET_MODEL} ${TTS_POCKET_MMPROJ} ${CMAKE_CURRENT_BINARY_DIR}/bench_tts_smoke)
set_tests_properties(bench_tts_smoke PROPERTIES FIXTURES_REQUIRED tts_models TIMEOUT 600)
