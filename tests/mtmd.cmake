# Multimodal (mtmd) tests: synthetic projectors next to the small text model (n_embd 256).
# Included by tests/CMakeLists.txt when the library is built with libmtmd.
set(VISION_MMPROJ ${MODELS_DIR}/mmproj-vision-tiny.gguf)
set(AUDIO_MMPROJ ${MODELS_DIR}/mmproj-audio-tiny.gguf)
# A clip encode long enough to hold several of the stateless callback's checkpoints (8 layers, 224x224).
set(VISION_SMALL_MMPROJ ${MODELS_DIR}/mmproj-vision-small.gguf)

# Text models with recurrent state of the same width, so that the projectors serve them too.
set(SMALL_LFM2_MODEL ${MODELS_DIR}/small-lfm2.gguf)
set(SMALL_MAMBA_MODEL ${MODELS_DIR}/small-mamba.gguf)

add_test(NAME make_mmproj
    COMMAND sh -c "${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/make_mmproj.py ${VISION_MMPROJ} --kind vision --n-embd-text 256 && ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/make_mmproj.py ${AUDIO_MMPROJ} --kind audio --n-embd-text 256 && ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/make_model.py ${SMALL_LFM2_MODEL} --arch lfm2 --n-embd 256 && ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/make_model.py ${SMALL_MAMBA_MODEL} --arch mamba --n-embd 256 && ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/make_mmproj.py ${VISION_SMALL_MMPROJ} --kind vision --preset small --n-embd-text 256")
set_tests_properties(make_mmproj PROPERTIES FIXTURES_SETUP mmproj FIXTURES_REQUIRED models)

# One program: the chunk tests (test_mtmd.cpp), the binding ones (test_mtmd_binding.cpp) and their
# helpers (mtmd_fixtures.cpp). One process per projector kind and text model, so that they run in
# parallel: the llama text model (KV cache), and an lfm2 (hybrid) and a mamba (recurrent) one for
# chunk rollback of recurrent state.
set(mtmd_program SOURCES test_mtmd.cpp test_mtmd_binding.cpp mtmd_fixtures.cpp
    INCLUDES ${MTMD_INCLUDE_DIR} LINK ${MTMD_LIBRARY})
foreach(text llama lfm2 mamba)
    if(text STREQUAL "llama")
        set(text_model ${SMALL_MODEL})
        set(suffix "")
    else()
        string(TOUPPER ${text} TEXT)
        set(text_model ${SMALL_${TEXT}_MODEL})
        set(suffix "_${text}")
    endif()
    # 17 cases of 1-30 s each, three to four times that beside the rest of the suite (-j2 on CI's two
    # cores: test_mtmd_audio_mamba took 204 s there): more than the suite's default.
    foreach(kind vision audio)
        llama_cancel_test(NAME test_mtmd_${kind}${suffix} TARGET test_mtmd ${mtmd_program} TIMEOUT 600
            ARGS --gtest_filter=*/${kind} FIXTURES models mmproj
            ENV "LLAMA_CANCEL_SMALL_MODEL=${text_model}" "LLAMA_CANCEL_VISION_MMPROJ=${VISION_MMPROJ}" "LLAMA_CANCEL_AUDIO_MMPROJ=${AUDIO_MMPROJ}")
        set(mtmd_program "")
    endforeach()
endforeach()
# The stateless callback bound as mtmd's cb_eval stops a clip encode.
llama_cancel_test(NAME test_mtmd_stateless TARGET test_mtmd ARGS --gtest_filter=MtmdStateless.*
    FIXTURES models mmproj
    ENV "LLAMA_CANCEL_SMALL_MODEL=${SMALL_MODEL}" "LLAMA_CANCEL_VISION_SMALL_MMPROJ=${VISION_SMALL_MMPROJ}")

# A video (issue 48): scripts/make_video.py writes a 2 s, 4 fps, 64x64 clip with the ffmpeg program
# (a failure here, ffmpeg missing included, fails test_mtmd_video too: it is not run); the test
# reads it with libmtmd's helper (ffprobe and ffmpeg children) and stops its frames' encodes and
# decodes on the tiny vision projector next to the small text model.
set(TEST_VIDEO ${MODELS_DIR}/video-64x64-4fps-2s.mp4)
add_test(NAME make_test_video COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/make_video.py ${TEST_VIDEO})
set_tests_properties(make_test_video PROPERTIES FIXTURES_SETUP video FIXTURES_REQUIRED models)
# Each case evaluates the clip's 8 frames several times (TIMEOUT: as the chunk tests above).
llama_cancel_test(NAME test_mtmd_video SOURCES test_mtmd_video.cpp mtmd_fixtures.cpp TIMEOUT 600
    INCLUDES ${MTMD_INCLUDE_DIR} LINK ${MTMD_LIBRARY} FIXTURES models mmproj video
    ENV "LLAMA_CANCEL_SMALL_MODEL=${SMALL_MODEL}" "LLAMA_CANCEL_VISION_MMPROJ=${VISION_MMPROJ}" "LLAMA_CANCEL_VIDEO=${TEST_VIDEO}")

# bench-mtmd's video row on the same clip and projector (issue 48).
add_test(NAME bench_video COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/bench_video.py
    $<TARGET_FILE:llama-cancel-bench> ${SMALL_MODEL} ${VISION_MMPROJ} ${TEST_VIDEO} ${CMAKE_CURRENT_BINARY_DIR}/bench_video.json)
set_tests_properties(bench_video PROPERTIES FIXTURES_REQUIRED "models;mmproj;video" TIMEOUT 600)

# The CLI with an image, an audio file and the test clip (8 frames).
add_test(NAME cli_media COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli_media.sh $<TARGET_FILE:llama-cancel-cli>
    ${SMALL_MODEL} ${VISION_MMPROJ} ${AUDIO_MMPROJ} ${TEST_VIDEO} 8)
set_tests_properties(cli_media PROPERTIES FIXTURES_REQUIRED "models;mmproj;video")
# `llama-cancel check --mmproj`: the projector's encodes' stop path too.
add_test(NAME cli_check_mmproj COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/cli_check.py
    $<TARGET_FILE:llama-cancel-cli> ${TINY_MODEL} ${SMALL_MODEL} ${VISION_MMPROJ})
set_tests_properties(cli_check_mmproj PROPERTIES FIXTURES_REQUIRED "models;mmproj")

# The Python module's multimodal test: an image chunk's encode stopped from the main thread.
add_test(NAME python_module_mtmd
    COMMAND ${Python3_EXECUTABLE} -m pytest -v -s ${PROJECT_SOURCE_DIR}/bindings/python/tests/test_mtmd.py -p no:cacheprovider)
set_tests_properties(python_module_mtmd PROPERTIES FIXTURES_REQUIRED "models;mmproj" SKIP_RETURN_CODE 77
    ENVIRONMENT "${PYTHON_TEST_ENV};LLAMA_CANCEL_SMALL_MODEL=${SMALL_MODEL};LLAMA_CANCEL_VISION_MMPROJ=${VISION_MMPROJ}")

# M-RoPE decoders (test_mtmd_mrope.cpp): libmtmd gives media embeddings 4 positions each when the
# text model's rope type is MROPE or IMROPE, whatever the projector. Five families, each checked
# against upstream's helper: Qwen2-VL's vision projector on its text model (qwen2vl, MROPE), Qwen3-VL's
# (deepstack: embeddings n_embd * 2 wide) on its text model (qwen3vl, IMROPE), an audio projector
# (qwen2a, as Qwen2.5-Omni's audio) on the qwen2vl text model, Qwen3-ASR's audio encoder (qwen3a) on
# a qwen3vl text model without deepstack inputs (IMROPE; the encoder's output is n_embd wide, as
# Qwen3-ASR's), and Qwen2-VL's vision projector on a hybrid text model with interleaved M-RoPE
# (qwen35, recurrent state rolled back too). qwen3a's 8 s windows are chunks of their own, so its
# first clip is 18 s (windows of 104, 104 and 39 tokens) and the stops land in that clip's second
# window. The same program runs LFM2-VL's projector (no M-RoPE) on the hybrid lfm2 text model and
# Voxtral's audio projector (no M-RoPE either: its text model is a llama one; stack 10: 75 tokens a
# clip, more than the embedding decode test's n_batch 64) and GLM-ASR's (glma: the whisper encoder's
# 1500 positions stacked by 15 and the begin and end embeddings, 102 tokens a clip) on the llama one.
set(MROPE_QWEN2VL_MODEL ${MODELS_DIR}/small-qwen2vl.gguf)
set(MROPE_QWEN35_MODEL ${MODELS_DIR}/small-qwen35.gguf)
set(MROPE_QWEN3VL_MODEL ${MODELS_DIR}/small-qwen3vl.gguf)
set(MROPE_QWEN3ASR_MODEL ${MODELS_DIR}/small-qwen3asr.gguf)
set(QWEN3A_MMPROJ ${MODELS_DIR}/mmproj-qwen3a-tiny.gguf)
set(VOXTRAL_MMPROJ ${MODELS_DIR}/mmproj-voxtral-tiny.gguf)
set(GLMA_MMPROJ ${MODELS_DIR}/mmproj-glma-tiny.gguf)
set(QWEN3VL_MMPROJ ${MODELS_DIR}/mmproj-qwen3vl-tiny.gguf)
set(QWEN2VL_MMPROJ ${MODELS_DIR}/mmproj-qwen2vl-tiny.gguf)
set(QWEN2A_MMPROJ ${MODELS_DIR}/mmproj-qwen2a-tiny.gguf)
set(LFM2VL_MMPROJ ${MODELS_DIR}/mmproj-lfm2vl-tiny.gguf)
set(py "${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts")
add_test(NAME make_mrope_models
    COMMAND sh -c "${py}/make_model.py ${MROPE_QWEN2VL_MODEL} --arch qwen2vl --n-embd 256 && ${py}/make_model.py ${MROPE_QWEN35_MODEL} --arch qwen35 --n-embd 256 && ${py}/make_mmproj.py ${QWEN2VL_MMPROJ} --kind vision --vision-projector qwen2vl --n-embd-text 256 && ${py}/make_mmproj.py ${QWEN2A_MMPROJ} --kind audio --projector qwen2a --n-embd-text 256 && ${py}/make_mmproj.py ${LFM2VL_MMPROJ} --kind vision --vision-projector lfm2 --n-embd-text 256 && ${py}/make_model.py ${MROPE_QWEN3VL_MODEL} --arch qwen3vl --n-embd 256 && ${py}/make_mmproj.py ${QWEN3VL_MMPROJ} --kind vision --vision-projector qwen3vl --n-embd-text 256 && ${py}/make_model.py ${MROPE_QWEN3ASR_MODEL} --arch qwen3vl --deepstack 0 --n-embd 256 && ${py}/make_mmproj.py ${QWEN3A_MMPROJ} --kind audio --projector qwen3a --n-embd-text 256 && ${py}/make_mmproj.py ${VOXTRAL_MMPROJ} --kind audio --projector voxtral --stack 10 --n-embd-text 256 && ${py}/make_mmproj.py ${GLMA_MMPROJ} --kind audio --projector glma --n-embd-text 256")
set_tests_properties(make_mrope_models PROPERTIES FIXTURES_SETUP mrope_models FIXTURES_REQUIRED "models;mmproj")
set(mrope_program SOURCES test_mtmd_mrope.cpp INCLUDES ${MTMD_INCLUDE_DIR} LINK ${MTMD_LIBRARY})

# The name suffix and SERIAL byte of a test on `backend`: no suffix on the CPU, "_<backend>" and SERIAL
# (one device run at a time) elsewhere. SERIAL_ON_CPU makes the CPU test serial too.
function(llama_cancel_backend_variant backend suffix_var serial_var)
    cmake_parse_arguments(V "SERIAL_ON_CPU" "" "" ${ARGN})
    if(backend STREQUAL "cpu")
        set(${suffix_var} "" PARENT_SCOPE)
        if(V_SERIAL_ON_CPU)
            set(${serial_var} SERIAL PARENT_SCOPE)
        else()
            set(${serial_var} "" PARENT_SCOPE)
        endif()
    else()
        set(${suffix_var} "_${backend}" PARENT_SCOPE)
        set(${serial_var} SERIAL PARENT_SCOPE)
    endif()
endfunction()

foreach(family qwen2vl qwen3vl qwen2a qwen3a qwen35 lfm2vl voxtral glma)
    set(text_model ${MROPE_QWEN2VL_MODEL})
    set(mmproj ${QWEN2VL_MMPROJ})
    set(mrope 1)
    set(audio_seconds 1)
    set(media_chunks 2)
    if(family STREQUAL "qwen2a")
        set(mmproj ${QWEN2A_MMPROJ})
    elseif(family STREQUAL "qwen3a")
        set(text_model ${MROPE_QWEN3ASR_MODEL})
        set(mmproj ${QWEN3A_MMPROJ})
        set(audio_seconds 18)
        set(media_chunks 4)
    elseif(family STREQUAL "qwen35")
        set(text_model ${MROPE_QWEN35_MODEL})
    elseif(family STREQUAL "qwen3vl")
        set(text_model ${MROPE_QWEN3VL_MODEL})
        set(mmproj ${QWEN3VL_MMPROJ})
    elseif(family STREQUAL "lfm2vl")
        set(text_model ${SMALL_LFM2_MODEL})
        set(mmproj ${LFM2VL_MMPROJ})
        set(mrope 0)
    elseif(family STREQUAL "voxtral")
        set(text_model ${SMALL_MODEL})
        set(mmproj ${VOXTRAL_MMPROJ})
        set(mrope 0)
    elseif(family STREQUAL "glma")
        set(text_model ${SMALL_MODEL})
        set(mmproj ${GLMA_MMPROJ})
        set(mrope 0)
    endif()
    foreach(backend cpu vulkan)
        # Not qwen35 on Vulkan (llvmpipe): there even an uninterrupted evaluation with the hook bound
        # differs from upstream's helper in the last bits, as in the memory tests above.
        if(NOT backend STREQUAL "cpu" AND (NOT backend IN_LIST BACKEND_SETUPS OR family STREQUAL "qwen35"))
            continue()
        endif()
        # Serial on the CPU too: each runs 2-thread encodes and decodes whose ggml threads spin, and
        # BudgetSlicesKeepThePositions slices decodes to 0.05 ms; beside other multi-threaded tests
        # on CI's 2 cores qwen2a's (about 5 s alone) ran past its 300 s timeout.
        llama_cancel_backend_variant(${backend} suffix serial SERIAL_ON_CPU)
        llama_cancel_test(NAME test_mtmd_mrope_${family}${suffix} TARGET test_mtmd_mrope ${mrope_program}
            FIXTURES models mmproj mrope_models ${serial}
            ENV "LLAMA_CANCEL_MROPE_MODEL=${text_model}" "LLAMA_CANCEL_MROPE_MMPROJ=${mmproj}" "LLAMA_CANCEL_BACKEND=${backend}"
                "LLAMA_CANCEL_MROPE_EXPECT=${mrope}" "LLAMA_CANCEL_MROPE_AUDIO_SECONDS=${audio_seconds}"
                "LLAMA_CANCEL_MROPE_MEDIA_CHUNKS=${media_chunks}")
        set(mrope_program "")
    endforeach()
endforeach()
# The CLI's media path on an M-RoPE text model: Qwen2-VL's projector and the audio one.
add_test(NAME cli_media_mrope COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli_media.sh $<TARGET_FILE:llama-cancel-cli>
    ${MROPE_QWEN2VL_MODEL} ${QWEN2VL_MMPROJ} ${QWEN2A_MMPROJ})
set_tests_properties(cli_media_mrope PROPERTIES FIXTURES_REQUIRED "models;mmproj;mrope_models")
# bench-mtmd --trace and scripts/trace_views.py on the small Qwen3-ASR pair (CPU): every way traced.
add_test(NAME bench_trace COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/bench_trace.py
    $<TARGET_FILE:llama-cancel-bench> ${MROPE_QWEN3ASR_MODEL} ${QWEN3A_MMPROJ} ${CMAKE_CURRENT_BINARY_DIR}/bench_trace)
set_tests_properties(bench_trace PROPERTIES FIXTURES_REQUIRED "models;mmproj;mrope_models" RUN_SERIAL TRUE TIMEOUT 600)
# The Python module's multimodal test on the same M-RoPE pair.
add_test(NAME python_module_mtmd_mrope
    COMMAND ${Python3_EXECUTABLE} -m unittest discover -v -s ${PROJECT_SOURCE_DIR}/bindings/python/tests -p "test_mtmd.py")
set_tests_properties(python_module_mtmd_mrope PROPERTIES FIXTURES_REQUIRED "models;mrope_models"
    ENVIRONMENT "${PYTHON_TEST_ENV};LLAMA_CANCEL_SMALL_MODEL=${MROPE_QWEN2VL_MODEL};LLAMA_CANCEL_VISION_MMPROJ=${QWEN2VL_MMPROJ}")

# Batched encodes (LLAMA_CANCEL_MTMD_BATCH_ENCODE, test_mtmd_batch.cpp): InternVL's projector, whose
# clip graph batches and whose tiles and thumbnail of a 128x64 image are three 64x64 image chunks in
# a row, next to the small text model; on the CPU and on Vulkan (llvmpipe), where a batched image's
# embeddings differ from its own encode's and the resume still gives the uninterrupted run's logits.
set(INTERNVL_MMPROJ ${MODELS_DIR}/mmproj-internvl-tiny.gguf)
add_test(NAME make_batch_mmproj
    COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/make_mmproj.py ${INTERNVL_MMPROJ} --kind vision
        --vision-projector internvl --n-embd-text 256)
set_tests_properties(make_batch_mmproj PROPERTIES FIXTURES_SETUP batch_mmproj FIXTURES_REQUIRED models)
set(batch_program SOURCES test_mtmd_batch.cpp INCLUDES ${MTMD_INCLUDE_DIR} LINK ${MTMD_LIBRARY})
foreach(backend cpu vulkan)
    if(NOT backend STREQUAL "cpu" AND NOT backend IN_LIST BACKEND_SETUPS)
        continue()
    endif()
    llama_cancel_backend_variant(${backend} suffix serial)
    llama_cancel_test(NAME test_mtmd_batch${suffix} TARGET test_mtmd_batch ${batch_program}
        FIXTURES models batch_mmproj ${serial}
        ENV "LLAMA_CANCEL_SMALL_MODEL=${SMALL_MODEL}" "LLAMA_CANCEL_BATCH_MMPROJ=${INTERNVL_MMPROJ}"
            "LLAMA_CANCEL_BACKEND=${backend}" "GGML_VK_VISIBLE_DEVICES=0")
    set(batch_program "")
endforeach()
