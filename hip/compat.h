/* One source, two vendors: the kernels are written in HIP's dialect. On
 * NVIDIA (nvcc, sources compiled as CUDA) the hip* runtime names map onto
 * cuda*; on AMD the real HIP headers are used, or, for the device-only
 * compile check with -nogpuinc, the minimal header in hip/amd/. The host
 * part is plain C so that validate/gpu_backend.c can use it too. */
#ifndef MLA_HIP_COMPAT_H
#define MLA_HIP_COMPAT_H

#if defined(MLA_HIP_MINIMAL)
#include "amd/hip_minimal.h"
#define MLA_TARGET_AMD 1
#elif defined(__HIP__) || defined(__HIPCC__) || defined(MLA_USE_HIP)
#include <hip/hip_runtime.h>
#define MLA_TARGET_AMD 1
#else
#include <cuda_runtime_api.h>
#if defined(__CUDACC__)
#include <cuda_runtime.h>
#endif
#define MLA_TARGET_NVIDIA 1
typedef cudaError_t hipError_t;
typedef cudaStream_t hipStream_t;
typedef cudaEvent_t hipEvent_t;
typedef struct cudaDeviceProp hipDeviceProp_t;
#define hipSuccess cudaSuccess
#define hipGetErrorString cudaGetErrorString
#define hipGetLastError cudaGetLastError
#define hipPeekAtLastError cudaPeekAtLastError
#define hipGetDeviceCount cudaGetDeviceCount
#define hipGetDevice cudaGetDevice
#define hipGetDeviceProperties cudaGetDeviceProperties
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipMemcpy cudaMemcpy
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemset cudaMemset
#define hipMemsetAsync cudaMemsetAsync
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipStreamCreate cudaStreamCreate
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamSynchronize cudaStreamSynchronize
#define hipEventCreate cudaEventCreate
#define hipEventDestroy cudaEventDestroy
#define hipEventRecord cudaEventRecord
#define hipEventSynchronize cudaEventSynchronize
#define hipEventElapsedTime cudaEventElapsedTime
#define hipFuncSetAttribute cudaFuncSetAttribute
#define hipFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
#endif

/* Warp shuffle under one name for both vendors (CUDA's needs a lane mask,
 * HIP's has none); width is a power of two <= 32. */
#if defined(__cplusplus) && (defined(__CUDACC__) || defined(__HIP__) || defined(MLA_HIP_MINIMAL))
#if defined(MLA_TARGET_NVIDIA)
__device__ __forceinline__ float mla_shfl_xor(float v, int mask, int width)
{
    return __shfl_xor_sync(0xffffffffu, v, mask, width);
}
#else
__device__ __forceinline__ float mla_shfl_xor(float v, int mask, int width)
{
    return __shfl_xor(v, mask, width);
}
#endif
#endif

#endif
