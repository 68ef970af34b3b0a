// Must NOT compile: MFMA broadcast modifiers (cbsz/abid/blgp) are not emulated.
typedef short v4s __attribute__((ext_vector_type(4)));
typedef float v16f __attribute__((ext_vector_type(16)));
v16f f(v4s a, v16f c)
{
    return __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a, a, c, 1, 0, 0);
}
