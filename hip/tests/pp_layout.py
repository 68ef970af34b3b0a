#!/usr/bin/env python3
"""Index check of the ping-pong stage 1's shared-memory operands
(hip/kernels/stage1_pp.h) against a model of wgmma's 128-byte-swizzled
operand layouts: K-major rows at (row / 8) * SBO + (row % 8) * 128, MN-major
MN atoms LBO apart and K rows SBO per 8, the swizzle XOR-ing address bits 4-6
with bits 7-9 (atoms on 1024-byte boundaries). The model is first held to
the H200-validated ws kernel's uses of the same forms (32-token tiles: the K
chain, the V halves with LBO 4096, P's 64 x 32 atom read at dp, dp + 2);
then the ping-pong kernel's formulas, transcribed from stage1_pp.h: the
gather's destinations, the 36-step chain's descriptor steps over Q and a
64-token block, Q's register steps (PP_QR), P's accumulator fragments and its
store into the rope atom as the other warpgroup's SS operand reads it, and
each warpgroup's V half (LBO 8192, 2 KB a k16 step). Then three planted
index errors must each be caught. Exit 0 when all holds. The kernel is
written by hand from the same formulas; a change to one belongs in the other.
"""
import sys

import planted


def swz(a):
    return a ^ (((a >> 7) & 7) << 4)


def toff(r, c, rows):  # device/smem_layout.h toff<true>, in elements
    return (c >> 6) * rows * 64 + r * 64 + ((((c >> 3) & 7) ^ (r & 7)) << 3) + (c & 7)


def kmajor(mem, addr, rows):
    """One k16 step of a K-major operand: rows x 16 elements from byte addr."""
    return [[mem.get(swz(addr + (i // 8) * 1024 + (i % 8) * 128 + 2 * kk) // 2)
             for kk in range(16)] for i in range(rows)]


def mnmajor(mem, addr, n, lbo):
    """One k16 step of an MN-major operand: 16 x n elements from byte addr."""
    return [[mem.get(swz(addr + (j // 64) * lbo + (kk // 8) * 1024 + (kk % 8) * 128 + 2 * (j % 64)) // 2)
             for j in range(n)] for kk in range(16)]


def cols(m, c0, n):
    return [row[c0:c0 + n] for row in m]


def calibrate():
    """The ws kernel's operands (validated on the H200) under the model."""
    tn, base, mem = 32, 16384, {}
    k = [[5_000_000 + t * 576 + c for c in range(576)] for t in range(tn)]
    for t in range(tn):
        for c in range(576):
            mem[base // 2 + toff(t, c, tn)] = k[t][c]
    db = base // 16
    for s in range(36):
        if s:
            db += 2 if s & 3 else (tn * 128 >> 4) - 6
        if kmajor(mem, db * 16, tn) != cols(k, 16 * s, 16):
            return "ws chain step %d" % s
    for g in range(2):
        for s in range(2):
            if mnmajor(mem, base + 4 * g * tn * 128 + 2048 * s, 256, tn * 128) != \
                    [row[256 * g:256 * g + 256] for row in k[16 * s:16 * s + 16]]:
                return "ws V half %d step %d" % (g, s)
    p = [[6_000_000 + r * 32 + c for c in range(32)] for r in range(64)]
    pbase = 65536
    for r in range(64):
        for c in range(32):
            mem[pbase // 2 + toff(r, c, 64)] = p[r][c]
    for s in range(2):
        if kmajor(mem, pbase + 32 * s, 64) != cols(p, 16 * s, 16):
            return "ws P step %d" % s
    return None


def check_pp(bug=None):
    atom, buf = 64 * 128, 9 * 64 * 128
    bq, bb, mem = 0, 64 * 576 * 2, {}
    q = [[1_000_000 + r * 576 + c for c in range(576)] for r in range(64)]
    for r in range(64):
        for c in range(576):
            mem[bq // 2 + toff(r, c, 64)] = q[r][c]
    pw = 1
    k = [[2_000_000 + t * 576 + c for c in range(576)] for t in range(64)]
    for lt in range(64):  # the gather: tk = lt >> 3, gc = lt & 7, tokens tk + 8 r
        tk, gc = lt >> 3, lt & 7
        chunk = gc if bug == "gather-unswizzled" else gc ^ tk
        dst = bb + pw * buf + tk * 128 + (chunk << 4)
        for r in range(8):
            for a in range(9):
                for e in range(8):
                    mem[(dst + r * 1024 + a * atom) // 2 + e] = k[tk + 8 * r][a * 64 + gc * 8 + e]
    da, db = bq // 16, (bb + pw * buf) // 16
    for s in range(36):  # pp_s_chain
        if s:
            inc = 2 if s & 3 else (atom >> 4) - (4 if bug == "atom-step" else 6)
            da += inc
            db += inc
        if kmajor(mem, da * 16, 64) != cols(q, 16 * s, 16):
            return "chain step %d: Q" % s
        if kmajor(mem, db * 16, 64) != cols(k, 16 * s, 16):
            return "chain step %d: K" % s
    for qr in (4, 8):  # qda: the descriptor of step PP_QR
        if kmajor(mem, bq + qr // 4 * atom, 64) != cols(q, 16 * qr, 16):
            return "Q register steps %d" % qr
    p = [[3_000_000 + r * 64 + c for c in range(64)] for r in range(64)]
    pst = bb + pw * buf + 8 * atom
    for w in range(4):
        for lane in range(32):
            t4, r0 = lane & 3, 16 * w + (lane >> 2)
            acc = [0] * 32  # m64n64: acc[4j + 2h + e] is row r0 + 8h, token 8j + 2t4 + e
            for j in range(8):
                for h in range(2):
                    for e in range(2):
                        acc[4 * j + 2 * h + e] = p[r0 + 8 * h][8 * j + 2 * t4 + e]
            for s in range(4):
                for e in range(4):
                    lo, hi = acc[8 * s + 2 * e], acc[8 * s + 2 * e + 1]
                    r, c = r0 + 8 * (e & 1), 16 * s + 8 * (e >> 1) + 2 * t4
                    # pa[s][e] must be the m16n8k16 A fragment a_e of k16 step s
                    if (lo, hi) != (p[r][c], p[r][c + 1]):
                        return "P fragment %d.%d of lane %d" % (s, e, lane)
                    off = pst // 2 + toff(r, c, 64)
                    mem[off], mem[off + 1] = lo, hi
    for s in range(4):
        if kmajor(mem, pst + 32 * s, 64) != cols(p, 16 * s, 16):
            return "P as the other warpgroup reads it, step %d" % s
    lbo = 4096 if bug == "v-lbo" else atom
    for x in range(2):
        for s in range(4):
            if mnmajor(mem, bb + pw * buf + 4 * x * atom + 2048 * s, 256, lbo) != \
                    [row[256 * x:256 * x + 256] for row in k[16 * s:16 * s + 16]]:
                return "V half %d step %d" % (x, s)
    return None


def calibrated():
    """None when the model reads the validated ws kernel right, else 1."""
    why = calibrate()
    if why:
        print("pp_layout: the model misreads the validated ws kernel: " + why)
        return 1
    print("pp_layout: the model reads the ws kernel's chain, V halves and P as validated")
    return None


if __name__ == "__main__":
    sys.exit(planted.main(sys.argv, __doc__, "the model reads the ws kernel right, the ping-pong indices hold and "
                          "every planted error is caught", "pp_layout", check_pp,
                          "gather, chain (36 steps), Q register steps, P fragments and store, V halves consistent",
                          ("gather-unswizzled", "atom-step", "v-lbo"), "index errors", first=calibrated))
