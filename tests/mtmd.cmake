# Multimodal (mtmd) tests: synthetic projectors next to the small text model (n_embd 256).
# Included by tests/CMakeLists.txt when the library is built with libmtmd.
set(VISION_MMPROJ ${MODELS_DIR}/mmproj-vision-tiny.gguf)
set(AUDIO_MMPROJ ${MODELS_DIR}/mmproj-audio-tiny.gguf)

add_test(NAME make_mmproj
    COMMAND sh -c "${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/make_mmproj.py ${VISION_MMPROJ} --kind vision --n-embd-text 256 && ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/make_mmproj.py ${AUDIO_MMPROJ} --kind audio --n-embd-text 256")
set_tests_properties(make_mmproj PROPERTIES FIXTURES_SETUP mmproj FIXTURES_REQUIRED models)

add_executable(test_mtmd test_mtmd.cpp)
target_include_directories(test_mtmd PRIVATE ${MTMD_INCLUDE_DIR})
target_link_libraries(test_mtmd PRIVATE llama-cancel-support GTest::gtest_main ${MTMD_LIBRARY})

# One process per projector kind, so that they run in parallel.
foreach(kind vision audio)
    add_test(NAME test_mtmd_${kind} COMMAND test_mtmd --gtest_filter=*/${kind})
    set_tests_properties(test_mtmd_${kind} PROPERTIES
        FIXTURES_REQUIRED "models;mmproj"
        ENVIRONMENT "LLAMA_CANCEL_SMALL_MODEL=${SMALL_MODEL};LLAMA_CANCEL_VISION_MMPROJ=${VISION_MMPROJ};LLAMA_CANCEL_AUDIO_MMPROJ=${AUDIO_MMPROJ}")
endforeach()

# The CLI with an image and an audio file.
add_test(NAME cli_media COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli_media.sh $<TARGET_FILE:llama-cancel-cli>
    ${SMALL_MODEL} ${VISION_MMPROJ} ${AUDIO_MMPROJ})
set_tests_properties(cli_media PROPERTIES FIXTURES_REQUIRED "models;mmproj")
