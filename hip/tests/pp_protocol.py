#!/usr/bin/env python3
"""Model check of the ping-pong stage 1's hand-over protocol; it mirrors
hip/kernels/stage1_pp.h (the FlashMLA-style pair schedule). Blocks come in
pairs q: block 2q is compute warpgroup 0's, in buffer 0; block 2q + 1
warpgroup 1's, in buffer 1 (absent in the last pair when the block count
is odd). A buffer frees by halves: the left half (atoms 0-3, V's columns
0-255) is read by its owner's S chain and warpgroup 0's PV; the right half
(atoms 4-8, V's columns 256-511 and the rope atom) by its owner's chain and
warpgroup 1's PV, and in buffer 0 also by warpgroup 1's PV of P(2q), which
warpgroup 0 stores into that rope atom after the chain has read it; P(2q +
1) goes into PX. The pair shares one running max: warpgroup 0 publishes the
max and factor of block 2q (sM, sSc0; SC0), warpgroup 1 its own against it
(sM, sSc1; SC1); P0R / P1R say P(2q) / P(2q + 1) are stored.

Actors, as generators that yield wherever another may run: the gather warps
of each parity (wait EMPTY_L of block j - 2, issue the left half's copies,
wait EMPTY_R, issue the right half's), the copies of each parity landing in
issue order and arriving on FULL_L / FULL_R (cp.async.mbarrier.arrive: they
land after the gather has moved on), and the two compute warpgroups, in the
kernel's order of waits, arrivals, wgmma issues, wgmma waits and stores.
One actor stands for a thread group: every barrier counts all the threads
of the group that arrives on it, so no warp can run ahead of its group's
arrival. mbarriers are planted.MBar phase counters waited by parity; each
waiter also counts the phases it has waited, and a barrier found two
phases past that count (parity aliasing) is a failure. The softmax is kept
symbolically: which block's running max each O, P and factor is at.

For 0-11 blocks and 300 random schedules each it checks: no deadlock; no
half-buffer (or PX) is written while a reader still needs its block; every
read (K/V half, P in the rope atom or PX, sM / sSc0 / sSc1) sees the block
or pair it expects, at issue and when its wgmma group completes; every P
meets an O at P's own max; each warpgroup adds every block once, pair by
pair (warpgroup 1 adds 2q + 1 before 2q: both are at the pair's max); the
parities in the kernel name the phases the waiters mean. Then it plants one
protocol bug at a time and requires each to be caught, so that a clean run
is not a blind model. The kernel is written by hand from the same steps; a
change to one belongs in the other."""
import sys

import planted


def wait(mb, who, parity):
    """mbarrier.try_wait.parity as the kernel spins on it, plus the checks
    that plain parity cannot make: the kernel's parity names the next phase
    this waiter has not yet waited for, and that phase's successor has not
    completed already (it would look pending again)."""
    k = mb.waits.get(who, 0)
    if parity != (k & 1):
        raise AssertionError("%s waits %s's phase %d with parity %d" % (who, mb.name, k, parity))
    while True:
        if mb.phase > k + 1:
            raise AssertionError("%s ran two phases ahead of %s (%d done, waiting for %d)"
                                 % (mb.name, who, mb.phase, k))
        if mb.done(parity):
            break
        yield
    mb.waits[who] = k + 1


def bar(name, count):
    mb = planted.MBar(count)
    mb.name = name
    mb.waits = {}
    return mb


class Groups:
    """A warpgroup's wgmma commit groups: a read may happen any time between
    its issue and the wait that retires its group, so the data must be
    right at both ends and its readers are released only at the wait."""

    def __init__(self):
        self.open, self.groups = [], []

    def read(self, check, release):
        why = check()
        if why:
            raise AssertionError(why)
        self.open.append((check, release))

    def commit(self):
        self.groups.append(self.open)
        self.open = []

    def wait(self, n):  # wgmma.wait_group n
        while len(self.groups) > n:
            for check, release in self.groups.pop(0):
                why = check()
                if why:
                    raise AssertionError(why + " (changed under the wgmma)")
                release()


# Who needs a freshly landed half of buffer b until it is done with it.
NEED_L = ({"wg0 chain", "wg0 PV"}, {"wg1 chain", "wg0 PV"})
NEED_R = ({"wg0 chain", "wg1 PV", "wg1 PV of P0"}, {"wg1 chain", "wg1 PV"})


def run(nb, seed, bug=None):
    # One arrival per actor: each stands for all the threads a barrier counts.
    full_l = [bar("FULL_L[0]", 1), bar("FULL_L[1]", 1)]
    full_r = [bar("FULL_R[0]", 1), bar("FULL_R[1]", 1)]
    empty_l = [bar("EMPTY_L[0]", 1), bar("EMPTY_L[1]", 1)]
    empty_r = [bar("EMPTY_R[0]", 1), bar("EMPTY_R[1]", 1)]
    qready, sc0, sc1 = bar("QREADY", 2), bar("SC0", 1), bar("SC1", 1)
    p0r, p1r = bar("P0R", 1), bar("P1R", 1)
    npair = (nb + 1) >> 1
    st = {
        "L": [None, None], "R": [None, None],  # block in each half (None: being written)
        "rope": [None, None],                  # ("K", block) or ("P0", pair, max)
        "px": None,                            # ("P1", pair, max)
        "sM": None, "sSc0": None, "sSc1": None,  # ("M", block) / (from block, to block)
    }
    need = {"L": [set(), set()], "R": [set(), set()], "px": set()}
    inflight = [[], []]   # copies issued, not landed: (half, block)
    issued = [False, False]
    otag = [-1, -1]       # the block whose running max each O is at
    order = ([], [])

    def overwrite(h, b, what):
        if need[h][b]:
            raise AssertionError("%s overwrite buffer %d's %s half while %s still need block %s"
                                 % (what, b, h, sorted(need[h][b]), st[h][b]))
        st[h][b] = None
        if h == "R":
            st["rope"][b] = None

    def gather(pw):
        for j in range(pw, nb, 2):
            ph = ((j >> 1) - 1) & 1  # block j - 2's release
            if j >= 2:
                yield from wait(empty_l[pw], "gather %d" % pw, ph)
            overwrite("L", pw, "block %d's copies" % j)
            inflight[pw].append(("L", j))
            yield
            if j >= 2 and bug != "gather-skips-empty-r":
                yield from wait(empty_r[pw], "gather %d" % pw, ph)
            overwrite("R", pw, "block %d's copies" % j)
            inflight[pw].append(("R", j))
            yield
        issued[pw] = True

    def copies(pw):
        while not issued[pw] or inflight[pw]:
            if inflight[pw]:
                h, j = inflight[pw].pop(0)
                st[h][pw] = j
                if h == "L":
                    need["L"][pw] = set(NEED_L[pw])
                    full_l[pw].arrive()
                else:
                    st["rope"][pw] = ("K", j)
                    need["R"][pw] = set(NEED_R[pw])
                    full_r[pw].arrive()
            yield

    def half_read(g, h, b, i, reader, rope=None):
        def check():
            if st[h][b] != i:
                return "%s reads block %s for %d in buffer %d's %s half" % (reader, st[h][b], i, b, h)
            if rope is not None and (st["rope"][b] or ())[:2] != rope:
                return "%s reads %s for %s in buffer %d's rope atom" % (reader, st["rope"][b], rope, b)
            return None
        g.read(check, lambda: need[h][b].discard(reader))

    def chain(g, x, i, h):
        mb = full_l[x] if h == "L" else full_r[x]
        yield from wait(mb, "wg %d" % x, (i >> 1) & 1)
        half_read(g, h, x, i, "wg%d chain" % x, ("K", i) if h == "R" else None)
        g.commit()
        yield

    def pv(x, i, ptag):
        # A P at one max added to an O at another is a wrong sum.
        if otag[x] != ptag:
            raise AssertionError("wg %d adds P(%d) at block %s's max to O at block %s's" % (x, i, ptag, otag[x]))
        order[x].append(i)

    def rescale(x, f, what):
        if otag[x] != f[0]:
            raise AssertionError("wg %d rescales O at block %s's max by %s's factor %s" % (x, otag[x], what, f))
        otag[x] = f[1]

    def store_p0(q, tag):
        i0 = 2 * q
        if st["R"][0] != i0 or st["rope"][0] != ("K", i0) or "wg0 chain" in need["R"][0]:
            raise AssertionError("P0 of pair %d stored over %s (block %s, readers %s)"
                                 % (q, st["rope"][0], st["R"][0], sorted(need["R"][0])))
        st["rope"][0] = None
        yield
        st["rope"][0] = ("P0", q, tag)
        p0r.arrive()
        yield

    def join_q(x):
        # Both compute warpgroups load Q and meet on QREADY.
        qready.arrive()
        yield
        yield from wait(qready, "wg %d" % x, 0)

    def wg0():
        g = Groups()
        if nb > 0:
            yield from join_q(0)
            yield from chain(g, 0, 0, "L")
            yield from chain(g, 0, 0, "R")
            g.wait(0)
            yield
        for q in range(npair):
            i0 = 2 * q
            has1, nxt, ph = i0 + 1 < nb, i0 + 2 < nb, q & 1
            m_old = st["sM"] if q > 0 else ("M", -1)
            if m_old != ("M", i0 - 1):
                raise AssertionError("wg 0 reads sM %s for block %d's max" % (m_old, i0 - 1))
            yield
            st["sM"], st["sSc0"] = ("M", i0), (m_old[1], i0)
            yield
            sc0.arrive()
            rescale(0, (m_old[1], i0), "block %d" % i0)
            yield
            half_read(g, "L", 0, i0, "wg0 PV")
            pv(0, i0, i0)
            g.commit()
            yield
            g.wait(0)
            empty_l[0].arrive()
            yield
            if bug == "p0-before-sc1":
                yield from store_p0(q, i0)
            yield from wait(sc1, "wg 0", ph)
            s1 = st["sSc1"]
            if s1 != (i0, i0 + 1 if has1 else i0):
                raise AssertionError("wg 0 reads sSc1 %s in pair %d" % (s1, q))
            yield
            if bug != "p0-before-sc1":
                yield from store_p0(q, s1[1])
            rescale(0, s1, "block %d" % (i0 + 1))
            if has1:
                yield from wait(p1r, "wg 0", ph)
                g.read(lambda: None if (st["px"] or ())[:2] == ("P1", q) else
                       "wg 0 reads %s in PX for pair %d's P1" % (st["px"], q), lambda: need["px"].discard("wg0 PV"))
                half_read(g, "L", 1, i0 + 1, "wg0 PV")
                pv(0, i0 + 1, st["px"][2])
                g.commit()
                yield
                if nxt:
                    yield from chain(g, 0, i0 + 2, "L")
                    g.wait(1)
                    empty_l[1].arrive()
                    yield
                    yield from chain(g, 0, i0 + 2, "R")
                    g.wait(0)
                else:
                    g.wait(0)
                    empty_l[1].arrive()
                yield

    def wg1():
        g = Groups()
        if nb > 0:
            yield from join_q(1)
        if nb > 1:
            yield from chain(g, 1, 1, "L")
            yield from chain(g, 1, 1, "R")
            g.wait(0)
            yield
        for q in range(npair):
            i1 = 2 * q + 1
            has1, nxt, ph = i1 < nb, i1 + 2 < nb, q & 1
            yield from wait(sc0, "wg 1", ph)
            m, s0 = st["sM"], st["sSc0"]
            if m != ("M", i1 - 1) or s0 != (i1 - 2, i1 - 1):
                raise AssertionError("wg 1 reads sM %s, sSc0 %s in pair %d" % (m, s0, q))
            yield
            new = i1 if has1 else i1 - 1
            st["sM"], st["sSc1"] = ("M", new), (i1 - 1, new)
            yield
            sc1.arrive()
            rescale(1, (s0[0], new), "sSc0 x sc")
            yield

            def pv0():
                yield from wait(p0r, "wg 1", ph)
                half_read(g, "R", 0, i1 - 1, "wg1 PV")
                half_read(g, "R", 0, i1 - 1, "wg1 PV of P0", ("P0", q))
                pv(1, i1 - 1, st["rope"][0][2])
                g.commit()
                yield
                if bug == "early-empty-r0":
                    empty_r[0].arrive()
                    yield

            if has1:
                if need["px"]:
                    raise AssertionError("P1 of pair %d overwrites PX while %s read pair %d's"
                                         % (q, sorted(need["px"]), q - 1))
                st["px"] = None
                yield
                st["px"], need["px"] = ("P1", q, new), {"wg0 PV"}
                p1r.arrive()
                yield
                half_read(g, "R", 1, i1, "wg1 PV")
                pv(1, i1, new)
                g.commit()
                yield
                yield from pv0()
                g.wait(1)
                empty_r[1].arrive()
                yield
                g.wait(0)
            else:
                yield from pv0()
                g.wait(0)
            if bug != "early-empty-r0":
                empty_r[0].arrive()
            yield
            if nxt:
                yield from chain(g, 1, i1 + 2, "L")
                yield from chain(g, 1, i1 + 2, "R")
                g.wait(0)
                yield

    planted.interleave([gather(0), gather(1), copies(0), copies(1), wg0(), wg1()], seed, 200000)
    for x in (0, 1):
        if sorted(order[x]) != list(range(nb)) or [i >> 1 for i in order[x]] != sorted(i >> 1 for i in order[x]):
            raise AssertionError("wg %d added blocks %s" % (x, order[x]))
        if nb and otag[x] != nb - 1:
            raise AssertionError("wg %d's O ends at block %d's max, not the last" % (x, otag[x]))
    if nb and st["sM"] != ("M", nb - 1):
        raise AssertionError("the lse reads sM %s" % (st["sM"],))


def check(bug):
    """The first failure over all block counts and schedules, or None."""
    return planted.sweep(run, range(12), range(300), bug)


if __name__ == "__main__":
    sys.exit(planted.main(sys.argv, __doc__, "the protocol holds and every planted bug is caught", "pp_protocol",
                          check, "12 block counts x 300 schedules: no deadlock, no stale read or early overwrite, "
                          "no barrier two phases ahead",
                          ("gather-skips-empty-r", "early-empty-r0", "p0-before-sc1"), "bugs"))
