# AMD device-only compile check of the HIP kernels (SPEC section 9): one
# ctest per arch (hip.compile.gfx942, hip.compile.gfx950, label hip-compile),
# clang-22 -x hip --offload-arch=ARCH -nogpulib -nogpuinc with the minimal
# device header in hip/amd/; per kernel VGPR / AGPR / LDS / spills /
# occupancy and the count of the arch's bf16 MFMA (llvm-objdump-22 -d).
# Versioned tools only (Debian 12: clang-22, llvm-22). A missing tool is a
# test failure that names the package, not a skip: run.sh installs both.
if(MLA_ENABLE_HIP_COMPILE_TEST)
  set(_mla_hip_clang "${MLA_HIP_CLANG}")
  if(NOT _mla_hip_clang)
    find_program(MLA_HIP_CLANG_FOUND NAMES clang-22)
    # Not found: pass the bare name, so the test fails naming the package.
    if(MLA_HIP_CLANG_FOUND)
      set(_mla_hip_clang "${MLA_HIP_CLANG_FOUND}")
    else()
      set(_mla_hip_clang clang-22)
    endif()
  endif()
  set(_mla_objdump "${MLA_LLVM_OBJDUMP}")
  if(NOT _mla_objdump)
    find_program(MLA_LLVM_OBJDUMP_FOUND NAMES llvm-objdump-22)
    if(MLA_LLVM_OBJDUMP_FOUND)
      set(_mla_objdump "${MLA_LLVM_OBJDUMP_FOUND}")
    else()
      set(_mla_objdump llvm-objdump-22)
    endif()
  endif()
  foreach(_arch IN LISTS MLA_AMD_ARCHS)
    add_test(NAME hip.compile.${_arch}
      COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/amd/compile_check.sh "${_mla_hip_clang}" "${_mla_objdump}"
              ${_arch} ${CMAKE_CURRENT_BINARY_DIR}/amd ${CMAKE_CURRENT_LIST_DIR}/amd_kernels.hip)
    set_tests_properties(hip.compile.${_arch} PROPERTIES LABELS hip-compile)
  endforeach()
endif()

# Static comparison with the seed on gfx942/gfx950 (issue 41:
# scripts/amd_static.py, reports/amd/). hip.amd-static recompiles ours for
# both archs and fails on a VGPR spill or scratch (either arch), any spill
# on gfx950, or a stage-1 LDS plan over the arch's LDS. amd_static_probe,
# built on demand by the script, reads our split plan from our C code and
# the emulator's executed counts.
add_test(NAME hip.amd-static
  COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/amd/static_check.sh "${_mla_hip_clang}" "${_mla_objdump}"
          ${CMAKE_CURRENT_BINARY_DIR}/amd-static)
set_tests_properties(hip.amd-static PROPERTIES LABELS "amd-static;hip-compile")
if(MLA_ENABLE_EMU)
  add_executable(amd_static_probe EXCLUDE_FROM_ALL ${CMAKE_SOURCE_DIR}/scripts/amd_static_probe.c)
  target_include_directories(amd_static_probe PRIVATE ${CMAKE_CURRENT_LIST_DIR})
  target_link_libraries(amd_static_probe PRIVATE mla_amd_emu mla_fixture ${CMAKE_DL_LIBS})
  set_target_properties(amd_static_probe PROPERTIES ENABLE_EXPORTS ON)
endif()
