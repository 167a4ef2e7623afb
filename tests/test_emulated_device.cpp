// Which devices get the emulated-device strategy (src/checkpoints/emulated_device.h): ggml-vulkan on the host's
// own cores only, never a real GPU. The llvmpipe test runs where tests/CMakeLists.txt registers the
// vulkan setup (GGML_VK_VISIBLE_DEVICES=0).
#include "checkpoints/emulated_device.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"

#include <gtest/gtest.h>

#include <cstring>

using llama_cancel::computes_on_host_cores;
using llama_cancel::on_emulated_vulkan;

// Descriptions as the backends report them (ggml_backend_dev_description): a GPU API's software
// implementation says so in its name, and llvmpipe reports itself a GPU.
TEST(EmulatedDevice, OnlyDevicesOnTheHostsCoresAreEmulated) {
    EXPECT_TRUE(computes_on_host_cores(GGML_BACKEND_DEVICE_TYPE_GPU, "llvmpipe (LLVM 22.1.8, 256 bits)"));
    EXPECT_TRUE(computes_on_host_cores(GGML_BACKEND_DEVICE_TYPE_GPU, "SwiftShader Device (Subzero)"));
    EXPECT_TRUE(computes_on_host_cores(GGML_BACKEND_DEVICE_TYPE_CPU, "AMD EPYC"));
    EXPECT_FALSE(computes_on_host_cores(GGML_BACKEND_DEVICE_TYPE_GPU, "NVIDIA GeForce RTX 4090"));
    EXPECT_FALSE(computes_on_host_cores(GGML_BACKEND_DEVICE_TYPE_IGPU, "Adreno (TM) 740"));
    EXPECT_FALSE(computes_on_host_cores(GGML_BACKEND_DEVICE_TYPE_IGPU, "Mali-G715"));
    EXPECT_FALSE(computes_on_host_cores(GGML_BACKEND_DEVICE_TYPE_GPU, "AMD Radeon RX 7900 XTX (RADV NAVI31)"));
    EXPECT_FALSE(computes_on_host_cores(GGML_BACKEND_DEVICE_TYPE_GPU, nullptr));
}

// A node in a buffer of the Vulkan device llvmpipe provides is the strategy's; one in host memory
// is not.
TEST(EmulatedDevice, LlvmpipeBuffersAreEmulated) {
    ggml_backend_load_all();
    ggml_backend_dev_t vulkan = nullptr;
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(i);
        if (std::strcmp(ggml_backend_reg_name(ggml_backend_dev_backend_reg(dev)), "Vulkan") == 0) {
            vulkan = dev;
        }
    }
    ASSERT_NE(vulkan, nullptr) << "no Vulkan device (GGML_VK_VISIBLE_DEVICES=0)";
    ASSERT_NE(std::strstr(ggml_backend_dev_description(vulkan), "llvmpipe"), nullptr)
        << "the test's device: " << ggml_backend_dev_description(vulkan);
    ggml_init_params params{ggml_tensor_overhead() * 2, nullptr, true};
    ggml_context *   ctx = ggml_init(params);
    ggml_tensor *    t   = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 16);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_dev_buffer_type(vulkan));
    ASSERT_NE(buf, nullptr);
    EXPECT_TRUE(on_emulated_vulkan(t));
    ggml_context *        host_ctx = ggml_init(params);
    ggml_tensor *         h        = ggml_new_tensor_1d(host_ctx, GGML_TYPE_F32, 16);
    ggml_backend_buffer_t host     = ggml_backend_alloc_ctx_tensors_from_buft(host_ctx, ggml_backend_cpu_buffer_type());
    ASSERT_NE(host, nullptr);
    EXPECT_FALSE(on_emulated_vulkan(h));
    ggml_backend_buffer_free(host);
    ggml_backend_buffer_free(buf);
    ggml_free(host_ctx);
    ggml_free(ctx);
}
