#!/usr/bin/env python3
"""Model check of the pair stage 1's hand-over protocol
(hip/kernels/stage1_pair.h): the two CTAs of a cluster, each with three
gather warps (one stage each), two S warpgroups (one query-row quarter
each) and two PV warpgroups, as generators that yield wherever another
may run; its mbarriers as phase counters with a transaction count
(st.async bytes land as complete_tx on the receiver's barrier, in either
order with the receiver's own arming arrival), waited for by parity; and
random schedules. For 0-9 blocks and 150 schedules each it checks: no
deadlock; a stage is refilled only once every S and PV warpgroup of its
CTA is done with it; a partner's partial scores never overwrite a slot
that has not been read (the slot's reuse rests on the next block's
exchange, not on a barrier of its own); a P slot is written only when no
PV warpgroup of either CTA reads it; every PV reads the four quarters of
P^T of its block and the right stage; each PV warpgroup adds the blocks in
order; the final 1 / l of all four quarters is in before the output is
scaled. Then it plants one protocol bug at a time and requires each to be
caught, so that a clean run is not a blind model. The kernel is written by
hand from the same steps; a change to one belongs in the other."""
import sys

import planted


MBar = planted.MBar
wait = planted.wait

STAGES = 3


def run(nb, seed, bug=None):
    C = (0, 1)
    # One actor stands for each warp group; a warpgroup's per-warp
    # arrivals count once.
    full = [[MBar(1) for _ in range(STAGES)] for _ in C]
    empty = [[MBar(4) for _ in range(STAGES)] for _ in C]  # 2 S + 2 PV
    sxf = [[[MBar(1) for _ in range(2)] for _ in range(2)] for _ in C]  # [cta][sw][slot]
    pf = [[MBar(2) for _ in range(2)] for _ in C]  # the 2 local S warpgroups, + 2 partners' bytes
    pe = [[MBar(4) for _ in range(2)] for _ in C]  # 2 local + 2 remote PV warpgroups
    fin = [MBar(2) for _ in C]
    stage = [[None] * STAGES for _ in C]
    users = [[set() for _ in range(STAGES)] for _ in C]
    sx = [[[None, None] for _ in range(2)] for _ in C]  # (block, read?)
    pbuf = [[[None] * 4 for _ in range(2)] for _ in C]  # [cta][slot][quarter] -> block
    puse = [[set() for _ in range(2)] for _ in C]
    fval = [[False] * 4 for _ in C]
    order = {(c, x): [] for c in C for x in (0, 1)}

    def gather(c, g):
        for u, j in enumerate(range(g, nb, STAGES)):
            if u >= 1 and bug != "gather-skips-empty":
                yield from wait(empty[c][g], (u - 1) & 1)
            if users[c][g]:
                raise AssertionError("cta %d block %d overwrites stage %d in use" % (c, j, g))
            stage[c][g] = None
            yield
            stage[c][g] = j
            full[c][g].arrive()
            yield

    def s_warpgroup(c, sw):
        pc = 1 - c
        qown = 2 * c + sw
        for i in range(nb):
            stg, sl = i % STAGES, i & 1
            ph = (i >> 1) & 1
            sxs, sxp = (0, i & 1) if bug == "sx-one-slot" else (sl, ph)
            yield from wait(full[c][stg], (i // STAGES) & 1)
            if stage[c][stg] != i:
                raise AssertionError("cta %d S %d chain reads block %s for %d" % (c, sw, stage[c][stg], i))
            users[c][stg].add(("S", sw))
            yield
            users[c][stg].discard(("S", sw))
            empty[c][stg].arrive()
            yield
            # The partner's quarter to the partner's S warpgroup sw.
            old = sx[pc][sw][sxs]
            if old is not None and not old[1]:
                raise AssertionError("cta %d S %d scores of block %d overwrite unread block %d"
                                     % (c, sw, i, old[0]))
            sx[pc][sw][sxs] = (i, False)
            sxf[pc][sw][sxs].complete_tx(1)
            yield
            sxf[c][sw][sxs].arrive(expect_tx=1)
            yield from wait(sxf[c][sw][sxs], sxp)
            got = sx[c][sw][sxs]
            if got != (i, False):
                raise AssertionError("cta %d S %d reads scores %s for block %d" % (c, sw, got, i))
            sx[c][sw][sxs] = (i, True)
            yield
            if i >= 2 and bug != "s-skips-pe-wait":
                yield from wait(pe[c][sl], ph ^ 1)
            for cc in C:
                if puse[cc][sl]:
                    raise AssertionError("cta %d S %d writes P slot %d of cta %d under a PV"
                                         % (c, sw, sl, cc))
            pbuf[c][sl][qown] = i
            yield
            pbuf[pc][sl][qown] = i  # st.async into the partner, counted there
            pf[pc][sl].complete_tx(1)
            yield
            pf[c][sl].arrive(expect_tx=0 if bug == "pf-no-arm" else 1)
            yield
        fval[c][qown] = True
        fval[pc][qown] = True
        fin[pc].complete_tx(1)
        fin[c].arrive(expect_tx=1)

    def pv_warpgroup(c, x):
        pc = 1 - c
        for i in range(nb):
            stg, sl = i % STAGES, i & 1
            yield from wait(full[c][stg], (i // STAGES) & 1)
            yield from wait(pf[c][sl], (i >> 1) & 1)
            if stage[c][stg] != i or pbuf[c][sl] != [i] * 4:
                raise AssertionError("cta %d PV %d reads stage %s, P quarters %s for block %d"
                                     % (c, x, stage[c][stg], pbuf[c][sl], i))
            users[c][stg].add(("PV", x))
            puse[c][sl].add(x)
            yield
            if stage[c][stg] != i or pbuf[c][sl] != [i] * 4:
                raise AssertionError("block %d changed under cta %d PV %d" % (i, c, x))
            order[(c, x)].append(i)
            users[c][stg].discard(("PV", x))
            puse[c][sl].discard(x)
            empty[c][stg].arrive()
            pe[c][sl].arrive()
            pe[pc][sl].arrive()
            yield
        yield from wait(fin[c], 0)
        if not all(fval[c]):
            raise AssertionError("cta %d PV %d scales with 1 / l of quarters %s" % (c, x, fval[c]))

    actors = []
    for c in C:
        actors += [gather(c, g) for g in range(STAGES)]
        actors += [s_warpgroup(c, sw) for sw in (0, 1)]
        actors += [pv_warpgroup(c, x) for x in (0, 1)]
    planted.interleave(actors, seed, 400000)
    for key, got in order.items():
        if got != list(range(nb)):
            raise AssertionError("cta %d PV %d added blocks %s" % (key[0], key[1], got))


def check(bug):
    """The first failure over all block counts and schedules, or None."""
    return planted.sweep(run, range(10), range(150), bug)


if __name__ == "__main__":
    sys.exit(planted.main(sys.argv, __doc__, "the protocol holds and every planted bug is caught", "pair_protocol",
                          check, "10 block counts x 150 schedules: no deadlock, no stale read",
                          ("gather-skips-empty", "s-skips-pe-wait", "sx-one-slot", "pf-no-arm"), "bugs"))
