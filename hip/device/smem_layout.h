// Element offsets in shared-memory tiles: padded rows or the 128-byte
// swizzled layout of wgmma.
#ifndef MLA_DEVICE_SMEM_LAYOUT_H
#define MLA_DEVICE_SMEM_LAYOUT_H

#include "../config.h"

namespace mla_dev {

// Element offset of (row, col) in a shared-memory tile of R rows. Padded rows
// (SW false: the mma.sync path; the 16-byte pad keeps ldmatrix rows on
// distinct banks) or the 128-byte swizzled K-major layout of wgmma (SW true):
// the columns are cut into 64-element (128-byte) atoms; atom column a of all
// R rows is one block of R x 128 bytes, row r at r * 128 bytes in it, and its
// 16-byte chunk j stored at chunk j ^ (r % 8). Eight consecutive chunks of one
// row, or one chunk of eight consecutive rows, then fall on eight distinct
// bank groups: cp.async stores of whole rows and ldmatrix reads of 8-row
// blocks are conflict-free, and wgmma reads it through a descriptor in its
// 128-byte swizzle mode (8-row groups 1024 bytes apart).
template <bool SW, int PITCH = DP> __device__ __forceinline__ int toff(int r, int c, int R)
{
    if constexpr (SW)
        return (c >> 6) * R * 64 + r * 64 + ((((c >> 3) & 7) ^ (r & 7)) << 3) + (c & 7);
    else
        return r * PITCH + c;
}

} // namespace mla_dev

#endif
