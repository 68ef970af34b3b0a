# NVIDIA build of the HIP-dialect GPU tiers (included from hip/CMakeLists.txt
# when MLA_ENABLE_CUDA is ON). Configures and builds with nvcc and no GPU;
# the GPU tests skip (exit 77) when no device is present.
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)

# The top level adds -Werror for every language under MLA_WERROR; nvcc reads
# a bare -Werror as its own option (it takes a value), so CUDA sources get
# the host compiler's -Werror through -Xcompiler instead.
get_property(_mla_dir_opts DIRECTORY PROPERTY COMPILE_OPTIONS)
list(TRANSFORM _mla_dir_opts REPLACE "^-Werror$" "$<$<NOT:$<COMPILE_LANGUAGE:CUDA>>:-Werror>")
set_property(DIRECTORY PROPERTY COMPILE_OPTIONS ${_mla_dir_opts})
if(MLA_WERROR)
  add_compile_options($<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Werror>)
endif()

# sm_90a: Hopper-only instructions are allowed (wgmma, setmaxnreg); the
# -gencode form is the one nvcc 13.0 accepts for the 'a' target (HOPPER.md).
set(MLA_CUDA_GENCODE "-gencode=arch=compute_90a,code=sm_90a" CACHE STRING
    "nvcc target flags of the GPU library")
separate_arguments(_mla_gencode UNIX_COMMAND "${MLA_CUDA_GENCODE}")

# One translation unit per kernel family (compiled in parallel), the host
# API apart; instances.h lists what each instantiates.
set(MLA_GPU_HIP_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/api.hip
  ${CMAKE_CURRENT_LIST_DIR}/launch_stage1_mma.hip
  ${CMAKE_CURRENT_LIST_DIR}/launch_stage1_ws.hip
  ${CMAKE_CURRENT_LIST_DIR}/launch_stage2_merge.hip
  ${CMAKE_CURRENT_LIST_DIR}/launch_generic.hip)
set_source_files_properties(${MLA_GPU_HIP_SOURCES} PROPERTIES LANGUAGE CUDA)

function(mla_gpu_library name kind)
  add_library(${name} ${kind} ${MLA_GPU_HIP_SOURCES} ${CMAKE_CURRENT_LIST_DIR}/split_policy.c)
  target_include_directories(${name} PUBLIC ${MLA_INCLUDE_DIR} PRIVATE ${CMAKE_CURRENT_LIST_DIR})
  set_target_properties(${name} PROPERTIES
    CUDA_ARCHITECTURES OFF
    CUDA_STANDARD 17
    CUDA_STANDARD_REQUIRED ON
    POSITION_INDEPENDENT_CODE ON
    CUDA_RUNTIME_LIBRARY Static)
  target_compile_options(${name} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:${_mla_gencode} -Xptxas=-v -lineinfo --expt-relaxed-constexpr>)
  target_link_libraries(${name} PUBLIC mla_core CUDA::cudart_static)
  if("${kind}" STREQUAL "STATIC")
    # Host stubs of the .hip sources are C++: a C program (mla-validate,
    # test_gpu) linking the static library needs the C++ runtime.
    target_link_libraries(${name} PUBLIC stdc++)
  endif()
endfunction()

# mla_core (core/, pure C, PIC) supplies mla_can_handle and the status
# codes; the shared library embeds it.
mla_gpu_library(mla_gpu STATIC)
mla_gpu_library(mla_gpu_shared SHARED)
set_target_properties(mla_gpu_shared PROPERTIES OUTPUT_NAME mla_gpu)

# mla-bench: timings of the tiers at K3 / DeepSeek-V3 TP8 shapes.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/bench/mla_bench.hip PROPERTIES LANGUAGE CUDA)
add_executable(mla-bench ${CMAKE_CURRENT_LIST_DIR}/bench/mla_bench.hip)
set_target_properties(mla-bench PROPERTIES CUDA_ARCHITECTURES OFF CUDA_STANDARD 17
                      CUDA_RUNTIME_LIBRARY Static)
target_compile_options(mla-bench PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${_mla_gencode}>)
target_include_directories(mla-bench PRIVATE ${CMAKE_CURRENT_LIST_DIR})
target_include_directories(mla-bench PRIVATE ${CMAKE_BINARY_DIR}/generated)
target_compile_options(mla-bench PRIVATE "SHELL:-include mla_version.h")
add_dependencies(mla-bench mla_version)
target_link_libraries(mla-bench PRIVATE mla_gpu ${CMAKE_DL_LIBS})

# The host side of the API (options, plans, workspace sizes, declines):
# no device needed.
add_executable(test_gpu_api ${CMAKE_CURRENT_LIST_DIR}/gpu_tests/test_api.c)
target_link_libraries(test_gpu_api PRIVATE mla_gpu)
add_test(NAME hip.gpu.api COMMAND test_gpu_api)
set_tests_properties(hip.gpu.api PROPERTIES LABELS "cpu;gpu")

# The fp8 decode of the kernels against the schema's C decoder, every code.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/gpu_tests/test_fp8.hip PROPERTIES LANGUAGE CUDA)
add_executable(test_gpu_fp8 ${CMAKE_CURRENT_LIST_DIR}/gpu_tests/test_fp8.hip)
set_target_properties(test_gpu_fp8 PROPERTIES CUDA_ARCHITECTURES OFF CUDA_STANDARD 17
                      CUDA_RUNTIME_LIBRARY Static)
target_compile_options(test_gpu_fp8 PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${_mla_gencode}>)
target_include_directories(test_gpu_fp8 PRIVATE ${CMAKE_CURRENT_LIST_DIR} ${MLA_INCLUDE_DIR})
target_link_libraries(test_gpu_fp8 PRIVATE mla_core CUDA::cudart_static)
add_test(NAME hip.fp8_decode COMMAND test_gpu_fp8)
set_tests_properties(hip.fp8_decode PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)

# How fast the stage-1 producer's S chain runs on the tensor pipe: a
# measurement tool for docs/perf/2026-12-01-ws-pvg.md ("What the tensor pipe gives"), not a check; built so that
# it keeps compiling.
add_executable(wgmma_rate ${CMAKE_CURRENT_LIST_DIR}/tests/wgmma_rate.cu)
set_target_properties(wgmma_rate PROPERTIES CUDA_ARCHITECTURES OFF CUDA_STANDARD 17
                      CUDA_RUNTIME_LIBRARY Static)
target_compile_options(wgmma_rate PRIVATE ${_mla_gencode})
target_include_directories(wgmma_rate PRIVATE ${CMAKE_CURRENT_LIST_DIR} ${MLA_INCLUDE_DIR})
target_link_libraries(wgmma_rate PRIVATE CUDA::cudart_static)

# Every tier on every catalogue case, the kept variants and compute-sanitizer
# run through mla-validate (validate/CMakeLists.txt): one evaluation loop.

# Validation of the shipped fixtures through the validator's GPU backends,
# once validate/ (added after hip/) has defined mla-validate.
function(mla_gpu_validate_tests)
  if(TARGET mla-validate)
    file(GLOB _fx ${CMAKE_SOURCE_DIR}/fixtures/data/*.h5)
    if(_fx)
      add_test(NAME hip.gpu.validate
        COMMAND mla-validate --backend gpu --backend gpu-baseline --backend gpu-fallback ${_fx})
      # mla-validate reports GPU backends n/a (exit 0) without a device:
      # that is a skip, not a pass.
      set_tests_properties(hip.gpu.validate PROPERTIES
        LABELS gpu RESOURCE_GROUPS "gpus:1" SKIP_RETURN_CODE 77
        SKIP_REGULAR_EXPRESSION "unavailable: no GPU")
    endif()
  endif()
endfunction()
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL mla_gpu_validate_tests)
