#!/usr/bin/env python3
"""Index check of the pair stage 1's shared-memory operands
(hip/kernels/stage1_pair.h) against the wgmma operand model of pp_layout.py
(128-byte swizzle: address bits 4-6 XOR bits 7-9; K-major rows at (row / 8)
* 1024 + (row % 8) * 128; MN-major atoms LBO apart), extended by the
unswizzled K-major core-matrix layout of the rope columns (8 rows x 16
bytes, 128 bytes apart along K, 512 per 8 rows; the layout the 96-row ws
kernel's P uses on the H200) and by stmatrix.trans (lane 8 q + c gives the
address of column c of tile q; lane l's register q holds row l / 4,
columns 2 (l % 4), + 1). For NR = 96 and 64 and both CTAs it checks, with
the formulas transcribed from the kernel: the gather's destinations of
each CTA's half of a block; the 18 steps of each S warpgroup's chain over
the block and over Q^T (its own quarter, then the partner-bound one); that
the partner-bound quarter is the one the partner's warpgroup of the same
index owns; P^T as both CTAs' S warpgroups store it (stmatrix.trans
locally, the same 16-byte chunks to the partner), read as the PV operand
over all NR rows; and each PV warpgroup's V^T tiles. Then three planted
index errors must each be caught. Exit 0 when all holds. These formulas
passed the H200 validation (perf log step 37), so a clean run also holds
the model's unswizzled and stmatrix.trans parts to hardware. The kernel is
written by hand from the same formulas; a change to one belongs in the
other."""
import sys

import planted

ATOM = 64 * 128          # PR_ATOM
ROPE = 4 * ATOM          # PR_ROPE
STAGE = ROPE + 64 * 64   # PR_STAGE


def swz(a):
    return a ^ (((a >> 7) & 7) << 4)


def kmajor(mem, addr, rows):
    """One k16 step of a 128-byte-swizzled K-major operand."""
    return [[mem.get(swz(addr + (i // 8) * 1024 + (i % 8) * 128 + 2 * kk))
             for kk in range(16)] for i in range(rows)]


def kint(mem, addr, rows):
    """One k16 step of an unswizzled K-major operand (LBO 128, SBO 512)."""
    return [[mem.get(addr + (i // 8) * 512 + (kk // 8) * 128 + (i % 8) * 16 + 2 * (kk % 8))
             for kk in range(16)] for i in range(rows)]


def mnmajor(mem, addr, n, lbo):
    """One k16 step of a 128-byte-swizzled MN-major operand: 16 x n."""
    return [[mem.get(swz(addr + (j // 64) * lbo + (kk // 8) * 1024 + (kk % 8) * 128 + 2 * (j % 64)))
             for j in range(n)] for kk in range(16)]


def put16(mem, addr, vals):
    """A 16-byte chunk (8 elements) written at byte address addr."""
    for e, v in enumerate(vals):
        mem[addr + 2 * e] = v


def check_nr(nr, bug):
    nq, na, jq = nr // 4, nr // 2, nr // 32
    kv = lambda t, c: ("kv", t, c)
    q = lambda row, c: ("q", row, c)
    p_of = lambda t, row: ("p", t, row)
    pbuf = [dict(), dict()]  # each CTA's P slot, by byte address
    for r in (0, 1):
        mem = {}
        # The gather: warp g's lane (tk, gc), tokens tk + 4 i.
        for t in range(64):
            for gc in range(8):
                for a in range(4):
                    put16(mem, a * ATOM + t * 128 + ((gc ^ (t & 7)) << 4),
                          [kv(t, 256 * r + 64 * a + 8 * gc + e) for e in range(8)])
                if gc < 4:
                    ra = ROPE + gc * 128 + (t & 7) * 16 + (0 if bug == "rope-no-group" else (t >> 3) * 512)
                    put16(mem, ra, [kv(t, 512 + 32 * r + 8 * gc + e) for e in range(8)])
        # Q^T rows m = na sw + c: query row nq qown + c (c < nq), else the
        # partner-bound quarter.
        qbase = 196 * 1024  # Q^T, as the stages, on a 1024-byte boundary
        qrow = {}
        for sw in (0, 1):
            qown = 2 * r + sw
            qpart = 2 * r + (1 - sw) if bug == "partner-quarter" else 2 * (1 - r) + sw
            for c in range(na):
                m = na * sw + c
                qrow[m] = nq * qown + c if c < nq else nq * qpart + c - nq
                for ch in range(36):
                    col = 256 * r + 8 * ch if ch < 32 else 512 + 32 * r + 8 * (ch - 32)
                    vals = [q(qrow[m], col + e) for e in range(8)]
                    if ch < 32:
                        put16(mem, qbase + (ch >> 3) * nr * 128 + m * 128 + (((ch & 7) ^ (m & 7)) << 4), vals)
                    else:
                        put16(mem, qbase + 4 * nr * 128 + (m >> 3) * 512 + (ch - 32) * 128 + (m & 7) * 16, vals)
        for sw in (0, 1):
            # The chain's descriptor steps (pair_s_chain), in bytes.
            da, db = 0, qbase + na * sw * 128
            for k in range(18):
                if 0 < k < 16:
                    da += 32 if k & 3 else ATOM - 96
                    db += 32 if k & 3 else nr * 128 - 96
                if k < 16:
                    a_op, b_op = kmajor(mem, da, 64), kmajor(mem, db, na)
                else:
                    a_op = kint(mem, ROPE + 256 * (k - 16), 64)
                    b_op = kint(mem, qbase + 4 * nr * 128 + na * sw * 64 + 256 * (k - 16), na)
                col0 = 256 * r + 16 * k if k < 16 else 512 + 32 * r + 16 * (k - 16)
                if a_op != [[kv(t, col0 + kk) for kk in range(16)] for t in range(64)]:
                    return "NR %d cta %d S %d chain step %d: K operand" % (nr, r, sw, k)
                if b_op != [[q(qrow[na * sw + i], col0 + kk) for kk in range(16)] for i in range(na)]:
                    return "NR %d cta %d S %d chain step %d: Q^T operand" % (nr, r, sw, k)
            # The partner-bound quarter is what the partner's S warpgroup
            # sw owns.
            if qrow[na * sw + nq] != nq * (2 * (1 - r) + sw):
                return "NR %d cta %d S %d sends quarter of row %d" % (nr, r, sw, qrow[na * sw + nq])
        # Each PV warpgroup's V^T tiles: dv 64 mt .. of this CTA's half.
        for x in (0, 1):
            for mi in range(2):
                mt = 2 * x + mi
                for k in range(4):
                    got = mnmajor(mem, mt * ATOM + k * 2048, 64, ATOM)
                    want = [[kv(16 * k + kk, 256 * r + 64 * mt + j) for j in range(64)] for kk in range(16)]
                    if got != want:
                        return "NR %d cta %d PV %d m-tile %d step %d: V^T operand" % (nr, r, x, mt, k)
        # P^T: each S warpgroup's own quarter, thread (w, lane) holding
        # tokens 16 w + lane / 4 (+ 8 h), columns 8 jj + 2 t4 (+ e).
        for sw in (0, 1):
            qown = 2 * r + sw
            local = {}
            for w in range(4):
                regs = {}  # (lane, jj, h) -> the two elements of the packed register
                for lane in range(32):
                    t4 = lane & 3
                    for jj in range(jq):
                        for h in range(2):
                            tok = 16 * w + lane // 4 + 8 * h
                            regs[(lane, jj, h)] = [p_of(tok, nq * qown + 8 * jj + 2 * t4 + e) for e in range(2)]
                tiles = [(jj, h) for jj in range(jq) for h in range(2)]
                for g in range(0, len(tiles), 4):
                    group = tiles[g:g + 4]
                    for lane in range(8 * len(group)):
                        qi, ci = lane // 8, lane % 8
                        jj, h = group[qi]
                        nrow = nq * qown + 8 * jj + ci
                        chunk = (2 * w + h) if bug == "stsm-no-swizzle" else ((2 * w + h) ^ (nrow & 7))
                        addr = nrow * 128 + (chunk << 4)
                        # .trans: column ci of tile qi, its 8 rows (tokens).
                        for rr in range(8):
                            src = regs[(4 * rr + ci // 2, jj, h)]
                            local[addr + 2 * rr] = src[ci % 2]
                # The warp's two chunks of each own row, to both CTAs.
                for idx in range(2 * nq):
                    nrow, cc = nq * qown + idx // 2, 2 * w + (idx & 1)
                    off = nrow * 128 + ((cc ^ (nrow & 7)) << 4)
                    for b in range(0, 16, 2):
                        for cta in (0, 1):
                            pbuf[cta][off + b] = local.get(off + b)
    for cta in (0, 1):
        for k in range(4):
            got = kmajor(pbuf[cta], 32 * k, nr)
            if got != [[p_of(16 * k + kk, n) for kk in range(16)] for n in range(nr)]:
                return "NR %d cta %d PV's P^T step %d" % (nr, cta, k)
    return None


def check(bug):
    for nr in (96, 64):
        why = check_nr(nr, bug)
        if why:
            return why
    return None


if __name__ == "__main__":
    sys.exit(planted.main(sys.argv, __doc__, "every index holds and every planted error is caught", "pair_layout",
                          check, "NR 96 and 64, both CTAs: gather, chains, P^T, V^T hold",
                          ("rope-no-group", "partner-quarter", "stsm-no-swizzle"), "index errors"))
