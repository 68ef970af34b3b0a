#!/usr/bin/env python3
"""Model check of the ping-pong stage 1's hand-over protocol
(hip/kernels/stage1_pp.h): its four actors (the gather warps of each buffer
parity, the two compute warpgroups) as generators that yield at every point
where another may run, its mbarriers as phase counters waited for by parity,
and random schedules. It checks, for 0-11 blocks and 300 schedules each:
no deadlock; a buffer is refilled only once both warpgroups are done with
its block; every read sees the block (K/V, P in the rope atom, published row
statistics) it expects; each warpgroup adds the blocks to its O in order.
Then it plants one protocol bug at a time and requires each to be caught,
so that a clean run is not a blind model. The kernel is written by hand
from the same steps; a change to one belongs in the other."""
import sys

import planted


MBar = planted.MBar
wait = planted.wait


def run(nb, seed, bug=None):
    # One actor stands for each thread group; its arrival counts once.
    full = [MBar(1), MBar(1)]
    empty = [MBar(2), MBar(2)]
    ready = [MBar(1), MBar(1)]
    buf = [None, None]       # block held by buffer b (None: being written)
    users = [set(), set()]   # warpgroups reading buffer b
    patom = [None, None]     # block whose P is in buffer b's rope atom
    pub = [None, None]       # block whose row statistics warpgroup x published
    order = {0: [], 1: []}

    def gather(pw):
        for j in range(pw, nb, 2):
            if j >= 2 and bug != "gather-skips-empty":
                yield from wait(empty[pw], ((j >> 1) - 1) & 1)
            if users[pw]:
                raise AssertionError("block %d overwrites buffer %d in use" % (j, pw))
            buf[pw] = None
            yield
            buf[pw] = j
            patom[pw] = None
            full[pw].arrive()
            yield

    def warpgroup(x):
        xo = 1 - x
        i = x
        while i <= nb:
            # Every chain follows the hand-over (the kernel dropped block
            # 1's early chain: perf log step 36).
            if i >= 1:  # block i - 1, the other's: its P times this half of V
                yield from wait(ready[xo], ((i - 1) >> 1) & 1)
                if pub[xo] != i - 1 or buf[xo] != i - 1 or patom[xo] != i - 1:
                    raise AssertionError("wg %d reads block %d: stats %s, K/V %s, P %s"
                                         % (x, i - 1, pub[xo], buf[xo], patom[xo]))
                users[xo].add(x)
                if bug == "early-release":
                    users[xo].discard(x)
                    empty[xo].arrive()
                yield
                if buf[xo] != i - 1 or patom[xo] != i - 1:
                    raise AssertionError("block %d changed under wg %d's PV" % (i - 1, x))
                order[x].append(i - 1)
                if bug != "early-release":
                    users[xo].discard(x)
                    empty[xo].arrive()
                yield
            if i < nb:  # block i, this warpgroup's
                yield from wait(full[x], (i >> 1) & 1)
                if buf[x] != i:
                    raise AssertionError("wg %d's chain reads block %s for %d" % (x, buf[x], i))
                users[x].add(x)
                if buf[x] != i:
                    raise AssertionError("block %d changed under wg %d's chain" % (i, x))
                if bug == "ready-before-p":
                    ready[x].arrive()
                yield
                patom[x] = i
                pub[x] = i
                yield
                if bug != "ready-before-p":
                    ready[x].arrive()
                yield
                if buf[x] != i:
                    raise AssertionError("block %d changed under wg %d's PV" % (i, x))
                order[x].append(i)
                users[x].discard(x)
                empty[x].arrive()
                yield
            i += 2

    planted.interleave([gather(0), gather(1), warpgroup(0), warpgroup(1)], seed, 200000)
    for x in (0, 1):
        if order[x] != list(range(nb)):
            raise AssertionError("wg %d added blocks %s" % (x, order[x]))


def check(bug):
    """The first failure over all block counts and schedules, or None."""
    return planted.sweep(run, range(12), range(300), bug)


if __name__ == "__main__":
    sys.exit(planted.main(sys.argv, __doc__, "the protocol holds and every planted bug is caught", "pp_protocol",
                          check, "12 block counts x 300 schedules: no deadlock, no stale read",
                          ("gather-skips-empty", "early-release", "ready-before-p"), "bugs"))
