# AMD device-only compile check of the HIP kernels (SPEC section 9), run as a
# ctest: clang -x hip --offload-arch=${MLA_AMD_ARCH} -nogpulib -nogpuinc with
# the minimal device header in hip/amd/, VGPR/AGPR/LDS printed per kernel and
# the stage-1 kernels checked for MFMA instructions. Skipped (exit 77) when no
# suitable clang exists.
if(MLA_ENABLE_HIP_COMPILE_TEST)
  set(_mla_hip_clang "${MLA_HIP_CLANG}")
  if(NOT _mla_hip_clang)
    find_program(MLA_HIP_CLANG_FOUND NAMES clang-19 clang-20 clang-21)
    if(MLA_HIP_CLANG_FOUND)
      set(_mla_hip_clang "${MLA_HIP_CLANG_FOUND}")
    endif()
  endif()
  add_test(NAME hip.compile.${MLA_AMD_ARCH}
    COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/amd/compile_check.sh "${_mla_hip_clang}" ${MLA_AMD_ARCH}
            ${CMAKE_CURRENT_BINARY_DIR}/amd ${CMAKE_CURRENT_LIST_DIR}/mla_kernels.hip)
  set_tests_properties(hip.compile.${MLA_AMD_ARCH} PROPERTIES
    LABELS hip-compile SKIP_RETURN_CODE 77)
endif()
