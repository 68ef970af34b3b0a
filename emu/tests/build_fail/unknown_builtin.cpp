// Must NOT compile: an amdgcn builtin the emulator does not implement.
int f(int v)
{
    return __builtin_amdgcn_permlane32_swap(v, v, false, false)[0];
}
