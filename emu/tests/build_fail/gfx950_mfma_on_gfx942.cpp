// Must NOT compile for the emulated gfx942: the gfx950-only MFMA is not
// provided there (ctest emu.build-fail.*, PASS_REGULAR_EXPRESSION).
typedef __bf16 v8b __attribute__((ext_vector_type(8)));
typedef float v16f __attribute__((ext_vector_type(16)));
v16f f(v8b a, v16f c)
{
    return __builtin_amdgcn_mfma_f32_32x32x16_bf16(a, a, c, 0, 0, 0);
}
