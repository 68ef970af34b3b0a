#!/usr/bin/env python3
"""Index check of the ping-pong stage 1's shared-memory operands
(hip/kernels/stage1_pp.h) against a model of wgmma's 128-byte-swizzled
operand layouts: K-major rows at (row / 8) * SBO + (row % 8) * 128, MN-major
MN atoms LBO apart and K rows SBO per 8, the swizzle XOR-ing address bits 4-6
with bits 7-9 (atoms on 1024-byte boundaries). The model is first held to
the H200-validated ws kernel's uses of the same forms (32-token tiles: the K
chain, the V halves with LBO 4096, P's 64 x 32 atom read at dp, dp + 2);
then the ping-pong kernel's formulas, transcribed from stage1_pp.h and
config.h: the shared-memory plan's alignments and its PP_NMBAR mbarriers
(the 13 hand-overs and ATOM[2][9], none shared, all initialised); a block
landing in either buffer by either path, the cp.async gather (each thread's
16-byte lines, a half at a time, the right half first in buffer 1) or nine
box copies (tma_load_2d of 64 columns x 64 slots at column 64 a, slot s0,
128-byte swizzled by the copy engine as the same address bits), both
paths checked in both buffers; each warpgroup's S chain atom by atom
(pp_s_chain_atom: Q's and the block's descriptors at atom A, 32 bytes a
k16 step), in its order (warpgroup 0 left half first, warpgroup 1 right
half first), the sum started by the first atom issued and by no other;
P's accumulator fragments (and the row of the factor P(2q) is rescaled
by), stored by pp_store_p into buffer 0's rope atom (P of the even block)
and into PX (the odd block's), each as the other warpgroup's SS operand
reads it at dp + 2k; and each warpgroup's V half of both buffers (LBO 8
KB, 2 KB a k16 step), read after the P stores, so the stores are seen to
leave V alone. Then four planted index errors must each be caught. Exit 0
when all holds. The kernel is written by hand from the same formulas; a
change to one belongs in the other.
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


# config.h's PP_ATOM, PP_BUF and stage1_pp_smem_plan's offsets.
ATOM, BUF = 64 * 128, 9 * 64 * 128       # PP_ATOM, PP_BUF
PLAN_Q, PLAN_BUF = 0, 64 * 576 * 2
PLAN_PX = PLAN_BUF + 2 * BUF
PLAN_PUB = PLAN_PX + ATOM
PLAN_MBAR = PLAN_PUB + 5 * 64 * 4
NMBAR = 13 + 2 * 9                       # PP_NMBAR
PLAN_BYTES = 1024 + PLAN_MBAR + NMBAR * 8
# The kernel's mbarrier offsets from SM.mbar: FULL_L/R[2] EMPTY_L/R[2],
# QREADY, SC0, SC1, P0R, P1R, then atom_mb(b, a); and the ones tid 0 inits.
MBARS = ([8 * b for b in range(2)] + [16 + 8 * b for b in range(2)] + [32 + 8 * b for b in range(2)]
         + [48 + 8 * b for b in range(2)] + [64, 72, 80, 88, 96]
         + [104 + 8 * (9 * b + a) for b in range(2) for a in range(9)])
MBARS_INIT = ([8 * i for i in range(2)] + [16 + 8 * i for i in range(2)] + [32 + 8 * i for i in range(2)]
              + [48 + 8 * i for i in range(2)] + [64, 72, 80, 88, 96] + [104 + 8 * i for i in range(18)])


def check_plan():
    # Every swizzled operand's XOR reads address bits 7-9, so its atoms
    # must sit on 1024-byte boundaries; descriptors keep addr >> 4 in 14
    # bits, and the kernel adds its steps to the whole descriptor, so a
    # carry out of that field would land in the reserved bits and LBO.
    for name, off in (("Q", PLAN_Q), ("buffers", PLAN_BUF), ("PX", PLAN_PX)):
        if off % 1024:
            return "%s at %d, not 1024-aligned" % (name, off)
    if PLAN_MBAR % 8:
        return "mbarriers not 8-aligned"
    if len(set(MBARS)) != len(MBARS) or max(MBARS) + 8 > NMBAR * 8:
        return "the mbarriers overlap or pass PP_NMBAR's %d" % NMBAR
    if sorted(MBARS) != sorted(MBARS_INIT):
        return "the mbarriers used are not the ones initialised"
    if PLAN_BYTES > 232448:
        return "%d bytes of shared memory" % PLAN_BYTES
    if 64 * (512 + 8) * 2 > 2 * BUF:
        return "the staged partial does not fit the buffers"
    if (1024 + PLAN_PUB) >> 4 >= 1 << 14:
        return "a descriptor's address overflows its field"
    return None


def check_pp(bug=None):
    for paths in (("gather", "box"), ("box", "gather")):
        why = check_paths(bug, paths)
        if why:
            return why
    return None


def check_paths(bug, paths):
    why = check_plan()
    if why:
        return "plan: " + why
    mem = {}
    q = [[1_000_000 + r * 576 + c for c in range(576)] for r in range(64)]
    for r in range(64):
        for c in range(576):
            mem[PLAN_Q // 2 + toff(r, c, 64)] = q[r][c]
    # Blocks 0 and 1 (different data) in buffers 0 and 1, each by the path
    # named in paths: the pool's slot s holds column c's value pool(s, c).
    def pool(sl, c):
        return (2 + sl // 1000) * 1_000_000 + (sl % 1000) * 576 + c
    blk = []
    for pw in range(2):
        base = (1 + pw) * 1000 + 37  # block pw's first slot
        if paths[pw] == "gather":  # any slots: a shuffled run
            slots = [base + (t * 29) % 64 for t in range(64)]
        else:                      # pp_block_run: 64 contiguous slots from s0
            slots = [base + t for t in range(64)]
        blk.append([[pool(slots[t], c) for c in range(576)] for t in range(64)])
        atom0 = PLAN_BUF + pw * BUF
        halves = ((4, 9), (0, 4)) if pw == 1 else ((0, 4), (4, 9))  # half_r first in buffer 1
        if paths[pw] == "gather":
            for lt in range(64):  # tk = lt >> 3, gc = lt & 7, tokens tk + 8 r
                tk, gc = lt >> 3, lt & 7
                dst = atom0 + tk * 128 + ((gc ^ tk) << 4)
                for a0, a1 in halves:  # copy(a0, a1)
                    for r in range(8):
                        for a in range(a0, a1):
                            for e in range(8):  # src: kv + sl kv_ss + gc 8, 128 bytes an atom on
                                mem[(dst + r * 1024 + a * ATOM) // 2 + e] = \
                                    pool(slots[tk + 8 * r], 64 * a + 8 * gc + e)
        else:
            for a0, a1 in halves:  # boxes(a0, a1): tma_load_2d(atom0 + a PP_ATOM, col TMA_BOX_COLS a, row s0)
                for a in range(a0, a1):
                    dst, col = atom0 + a * ATOM, (128 if bug == "box-col-bytes" else 64) * a
                    if dst % 1024:
                        return "buffer %d's box %d at %d, not 1024-aligned for the swizzle" % (pw, a, dst)
                    for r in range(64):  # box row r: slot s0 + r, 128 bytes at r * 128, swizzled
                        for e in range(64):
                            mem[swz(dst + r * 128 + 2 * e) // 2] = pool(slots[0] + r, col + e)
    for x in range(2):  # chain_l / chain_r (x 0) or chain_odd (x 1): pp_s_chain_atom<A, INIT>
        bx = PLAN_BUF + x * BUF
        order = list(range(9)) if x == 0 else list(range(4, 9)) + list(range(4))
        init = {0} if x == 0 else ({0, 4} if bug == "odd-init-left" else {4})  # first: true_type
        acc = ["stale"]  # S of the warpgroup's previous block
        for a in order:
            qa = 0 if bug == "atom-q-base" else a
            da, db = (PLAN_Q + qa * ATOM) >> 4, (bx + a * ATOM) >> 4
            for k in range(4):
                s = 4 * a + k
                if k:
                    da += 2
                    db += 2
                if kmajor(mem, da * 16, 64) != cols(q, 16 * s, 16):
                    return "wg %d chain step %d: Q" % (x, s)
                if kmajor(mem, db * 16, 64) != cols(blk[x], 16 * s, 16):
                    return "wg %d chain step %d: K (%s path)" % (x, s, paths[x])
                if a in init and k == 0:  # wgmma<0>: the sum starts here
                    acc = []
                acc.append(s)
        if acc[:1] == ["stale"] or sorted(acc) != list(range(36)):
            return "wg %d's S sums steps %s, not 0-35 once each" % (x, acc)
    # P: warpgroup 0's (block 0) into buffer 0's rope atom, read by
    # warpgroup 1; warpgroup 1's (block 1) into PX, read by warpgroup 0.
    # Stored after the chains, before the V reads: the V checks below then
    # also say the stores left V's atoms (read at the same time) alone.
    for x, pst in ((0, PLAN_BUF + 8 * ATOM), (1, PLAN_PX)):
        p = [[(4 + x) * 1_000_000 + r * 64 + c for c in range(64)] for r in range(64)]
        f = [7_000_000 + r for r in range(64)]  # a row's factor (s1 in warpgroup 0)
        for w in range(4):
            for lane in range(32):
                t4, r0 = lane & 3, 16 * w + (lane >> 2)
                acc = [0] * 32  # m64n64: acc[4j + 2h + e] is row r0 + 8h, token 8j + 2t4 + e
                for j in range(8):
                    for h in range(2):
                        for e in range(2):
                            acc[4 * j + 2 * h + e] = p[r0 + 8 * h][8 * j + 2 * t4 + e]
                s1 = (f[r0], f[r0 + 8])  # sSc1[r0], sSc1[r0 + 8]
                for s in range(4):
                    for e in range(4):
                        lo, hi = acc[8 * s + 2 * e], acc[8 * s + 2 * e + 1]
                        r, c = r0 + 8 * (e & 1), 16 * s + 8 * (e >> 1) + 2 * t4  # pp_store_p
                        # pa[s][e] must be the m64k16 A fragment a_e of k16 step s
                        if (lo, hi) != (p[r][c], p[r][c + 1]):
                            return "wg %d P fragment %d.%d of lane %d" % (x, s, e, lane)
                        if x == 0 and s1[e & 1] != f[r]:
                            return "wg 0 rescales P fragment %d.%d by another row's factor" % (s, e)
                        off = pst // 2 + toff(r, c, 64)
                        mem[off], mem[off + 1] = lo, hi
        dp = pst >> 4
        for s in range(4):  # dp + 2 k
            if kmajor(mem, (dp + 2 * s) * 16, 64) != cols(p, 16 * s, 16):
                return "wg %d's P as wg %d reads it, step %d" % (x, 1 - x, s)
    lbo = 4096 if bug == "v-lbo" else ATOM
    for pw in range(2):
        for x in range(2):  # wg_desc_mn_sw128_lbo(b + 4 x PP_ATOM, PP_ATOM) + k (2048 >> 4)
            dv = (PLAN_BUF + pw * BUF + 4 * x * ATOM) >> 4
            for s in range(4):
                if mnmajor(mem, (dv + s * (2048 >> 4)) * 16, 256, lbo) != \
                        [row[256 * x:256 * x + 256] for row in blk[pw][16 * s:16 * s + 16]]:
                    return "buffer %d's V half %d (wg %d) step %d" % (pw, x, x, s)
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
                          "plan and mbarriers, gather and box copies in both buffers, both chains atom by atom and "
                          "summed once, P fragments, P0 in the rope atom and P1 in PX as read, both buffers' V halves "
                          "consistent", ("box-col-bytes", "atom-q-base", "odd-init-left", "v-lbo"), "index errors",
                          first=calibrated))
