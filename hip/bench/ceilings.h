// mla-bench's ceilings, measured in the same run as the timings (SPEC
// section 8): the device copy bandwidth and the bf16 GEMM rate. Included
// once, by mla_bench.hip (its CK macro and headers).
#pragma once

// Device-to-device copy, bytes read + written per second.
static double measure_copy_bw()
{
    const size_t bytes = (size_t)2 << 30;
    void *a, *b;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    fill(a, bytes / 2, 1, 1.f);
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<double> t;
    for (int i = 0; i < 12; ++i) {
        CK(cudaEventRecord(e0));
        CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (i >= 2)
            t.push_back(ms * 1e-3);
    }
    CK(cudaFree(a));
    CK(cudaFree(b));
    return 2.0 * bytes / median(t);
}

// bf16 8192^3 GEMM through cuBLAS, loaded at run time so the benchmark links
// and runs where cuBLAS is missing (the rate is then reported as unmeasured).
static double measure_gemm_rate(std::string &note)
{
    void *h = dlopen("libcublas.so.13", RTLD_NOW);
    if (!h)
        h = dlopen("libcublas.so", RTLD_NOW);
    if (!h) {
        note = "cuBLAS not found: GEMM rate unmeasured";
        return 0;
    }
    typedef int (*create_t)(void **);
    typedef int (*destroy_t)(void *);
    typedef int (*gemm_t)(void *, int, int, int, int, int, const void *, const void *, int, int,
                          const void *, int, int, const void *, void *, int, int, int, int);
    create_t create = (create_t)dlsym(h, "cublasCreate_v2");
    destroy_t destroy = (destroy_t)dlsym(h, "cublasDestroy_v2");
    gemm_t gemm = (gemm_t)dlsym(h, "cublasGemmEx");
    if (!create || !destroy || !gemm) {
        note = "cuBLAS symbols missing: GEMM rate unmeasured";
        return 0;
    }
    const int n = 8192;
    const int R_16BF = 14, R_32F = 0, COMPUTE_32F = 68, ALGO_DEFAULT = -1;
    void *A, *B, *C, *handle;
    CK(cudaMalloc(&A, (size_t)n * n * 2));
    CK(cudaMalloc(&B, (size_t)n * n * 2));
    CK(cudaMalloc(&C, (size_t)n * n * 4));
    fill(A, (size_t)n * n, 2, 1.f);
    fill(B, (size_t)n * n, 3, 1.f);
    if (create(&handle) != 0) {
        note = "cublasCreate failed: GEMM rate unmeasured";
        return 0;
    }
    const float one = 1.f, zero = 0.f;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<double> t;
    for (int i = 0; i < 13; ++i) {
        CK(cudaEventRecord(e0));
        int rc = gemm(handle, 0, 0, n, n, n, &one, A, R_16BF, n, B, R_16BF, n, &zero, C, R_32F, n,
                      COMPUTE_32F, ALGO_DEFAULT);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        if (rc != 0) {
            note = "cublasGemmEx failed: GEMM rate unmeasured";
            return 0;
        }
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (i >= 3)
            t.push_back(ms * 1e-3);
    }
    destroy(handle);
    CK(cudaFree(A));
    CK(cudaFree(B));
    CK(cudaFree(C));
    note = "cuBLAS bf16 GEMM 8192^3, fp32 accumulate, fp32 output";
    return 2.0 * n * n * (double)n / median(t);
}

