#!/usr/bin/env python3
"""Model check of the ping-pong stage 1's hand-over protocol; it mirrors
hip/kernels/stage1_pp.h (the FlashMLA-style pair schedule). Blocks come in
pairs q: block 2q is compute warpgroup 0's, in buffer 0; block 2q + 1
warpgroup 1's, in buffer 1 (absent in the last pair when the block count
is odd). A buffer is nine atoms and frees by halves: the left half (atoms
0-3, V's columns 0-255) is read by its owner's S chain and warpgroup 0's
PV; the right half (atoms 4-8: V's columns 256-511 in 4-7, the rope atom
8) by its owner's chain and warpgroup 1's PV, and in buffer 0 also by
warpgroup 1's PV of P(2q), which warpgroup 0 stores into that rope atom
after the chain has read it; P(2q + 1) goes into PX. The pair shares one
running max: warpgroup 0 publishes the max and factor of block 2q (sM,
sSc0; SC0), warpgroup 1 its own against it (sM, sSc1; SC1); P0R / P1R say
P(2q) / P(2q + 1) are stored.

A block lands by one of two paths, which the gather picks per block and
the consumer cannot tell apart. The box path (whole blocks whose slots run
contiguously): per half, the gather's 64 threads arrive on FULL_L / FULL_R
as they issue (plain arrivals, so FULL says issued, not landed), and its
thread 0 arms each atom's ATOM[b][a] (count 1) with the atom's bytes and
issues that atom's box copy, whose bytes land on it later, atom by atom
in any order. The cp.async path (the rest): the copies arrive on FULL when
they land (cp.async.mbarrier.arrive), and thread 0 arrives on the half's
ATOM barriers at once, so FULL carries the bytes. Either way the S chain
waits FULL of a half, then, atom by atom, ATOM of that atom before its
wgmma, one commit group per atom (four in the left half, five in the
right). Warpgroup 0's chain of block 2q + 2 goes behind its PV of block
2q + 1's left half, so it waits until at most the left chain's four groups
are pending before it frees buffer 1's left half (EMPTY_L(1)). An odd
block's chain reads the right half first (warpgroup 1 itself frees buffer
1's right half, earlier than warpgroup 0 frees the left), and the gather
of parity 1 waits for and copies the right half first too; parity 0 keeps
left, then right.

Actors, as generators that yield wherever another may run: the gather of
each parity (per half: wait EMPTY of block j - 2, issue the half's copies
or boxes with the arrivals above); the cp.async copies of each parity,
landing in issue order and arriving on FULL; the box copies of each
parity, one landing at a time in random order, each completing its
atom's bytes; and the two compute warpgroups, in the kernel's order of
waits, arrivals, wgmma issues, wgmma waits and stores. Which path each
block takes is drawn per schedule: every block gathered (no tensor map),
every block boxed, or a random mix. One actor stands for a thread group:
every barrier counts all the threads of the group that arrives on it, so
no warp can run ahead of its group's arrival; on the box path the other
63 gather threads may arrive on FULL before or after thread 0 issues, so
the model completes FULL at a random point of thread 0's issues.
mbarriers are planted.MBar phase counters (with transaction bytes) waited
by parity; each waiter also counts the phases it has waited, and a barrier
found two phases past that count (parity aliasing) is a failure. The
softmax is kept symbolically: which block's running max each O, P and
factor is at.

For 0-11 blocks and 300 random schedules each it checks: no deadlock; no
half-buffer (or PX) is copied over while a reader still needs its block
(from the copies' issue, since a copy may write at any time until it
lands); every read (an atom of the S chain, V's atoms of a half, P in the
rope atom or PX, sM / sSc0 / sSc1) sees the block or pair it expects, at
issue and when its wgmma group completes; every P meets an O at P's own
max; each warpgroup adds every block once, pair by pair (warpgroup 1 adds
2q + 1 before 2q: both are at the pair's max); the parities in the kernel
name the phases the waiters mean. Three variants of the kernel must hold
as well: MLA_PP_ODD_L_FIRST (chain and gather of an odd block left
first), the parity-1 gather left first under a right-first chain (only
slower), and wg_wait<1> before EMPTY_L(1) (retires more than the PV: only
slower). Then it plants one protocol bug at a time and requires each to be
caught, so that a clean run is not a blind model. The kernel is written by
hand from the same steps; a change to one belongs in the other."""
import random
import sys

import planted

ATOM_BYTES = 64 * 128                    # PP_ATOM: a box copy's bytes
HALF = {"L": (0, 1, 2, 3), "R": (4, 5, 6, 7, 8)}
V_HALF = {"L": (0, 1, 2, 3), "R": (4, 5, 6, 7)}  # the atoms a PV reads
L_GROUPS = len(HALF["L"])                # chain_l's commit groups (one per atom)
SKIP_ATOM = 2                            # the atom whose wait "skip-atom-wait" drops


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


def skip(mb, who):
    """A wait the kernel leaves out: its parity formula still names the
    next phase, so the waiter's count moves on without looking."""
    mb.waits[who] = mb.waits.get(who, 0) + 1


def bar(name, count):
    mb = planted.MBar(count)
    mb.name = name
    mb.waits = {}
    return mb


class Groups:
    """A warpgroup's wgmma commit groups: a read may happen any time between
    its issue and the wait that retires its group, so the data must be
    right at both ends and its readers are released only at the wait.
    Groups retire in commit order (wgmma.wait_group n: at most n pending)."""

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


def needs(h, b):
    """Who must read a freshly issued half h of buffer b before it may be
    copied over: its owner's chain atom by atom (each atom's group retires
    on its own), and the PVs of V's half (and of P(2q) in buffer 0's rope)."""
    chain = {"wg%d chain %d" % (b, a) for a in HALF[h]}
    if h == "L":
        return chain | {"wg0 PV"}
    return chain | {"wg1 PV"} | ({"wg1 PV of P0"} if b == 0 else set())


def run(nb, seed, bug=None):
    rnd = random.Random(1_000_003 * seed + nb + 1)  # the paths, FULL's point and the boxes' order
    mode = seed % 3
    box = [mode == 1 or (mode == 2 and rnd.random() < 0.5) for _ in range(nb)]
    # One arrival per actor: each stands for all the threads a barrier counts.
    full = {h: [bar("FULL_%s[%d]" % (h, b), 1) for b in (0, 1)] for h in "LR"}
    empty = {h: [bar("EMPTY_%s[%d]" % (h, b), 1) for b in (0, 1)] for h in "LR"}
    atom = [[bar("ATOM[%d][%d]" % (b, a), 1) for a in range(9)] for b in (0, 1)]
    qready, sc0, sc1 = bar("QREADY", 2), bar("SC0", 1), bar("SC1", 1)
    p0r, p1r = bar("P0R", 1), bar("P1R", 1)
    npair = (nb + 1) >> 1
    st = {
        "A": [[None] * 9, [None] * 9],         # block in each atom (None: being written)
        "rope": [None, None],                  # atom 8: ("K", block) or ("P0", pair, max)
        "px": None,                            # ("P1", pair, max)
        "sM": None, "sSc0": None, "sSc1": None,  # ("M", block) / (from block, to block)
    }
    need = {"L": [set(), set()], "R": [set(), set()], "px": set()}
    copies_out = [[], []]  # cp.async halves issued, not landed: (half, block)
    boxes_out = [[], []]   # box copies issued, not landed: (atom, block)
    issued = [False, False]
    otag = [-1, -1]        # the block whose running max each O is at
    order = ([], [])
    odd_r_first = bug != "odd-l-first"

    def overwrite(h, b, j, what):
        # From the issue on, a copy may write any byte of its half.
        if need[h][b]:
            raise AssertionError("block %d's %s overwrite buffer %d's %s half while %s still need block %s"
                                 % (j, what, b, h, sorted(need[h][b]), st["A"][b][HALF[h][0]]))
        for a in HALF[h]:
            st["A"][b][a] = None
        if h == "R":
            st["rope"][b] = None
        need[h][b] = needs(h, b)

    def land(b, a, j):
        st["A"][b][a] = j
        if a == 8:
            st["rope"][b] = ("K", j)

    def gather(pw):
        first = "R" if pw == 1 and odd_r_first and bug != "odd-gather-l-first" else "L"
        for j in range(pw, nb, 2):
            ph = ((j >> 1) - 1) & 1  # block j - 2's release
            for h in (first, "R" if first == "L" else "L"):
                if j >= 2 and not (bug == "gather-skips-empty-r" and h == "R"):
                    yield from wait(empty[h][pw], "gather %d" % pw, ph)
                if box[j]:
                    overwrite(h, pw, j, "boxes")
                    at = rnd.randrange(len(HALF[h]) + 1)  # FULL's 64th arrival
                    for n, a in enumerate(HALF[h] + (None,)):
                        if n == at:
                            full[h][pw].arrive()
                            yield
                        if a is not None:
                            atom[pw][a].arrive(expect_tx=0 if bug == "box-plain-arrive" else ATOM_BYTES)
                            boxes_out[pw].append((a, j))
                            yield
                else:
                    overwrite(h, pw, j, "copies")
                    copies_out[pw].append((h, j))
                    yield
                    for a in range(9) if bug == "atoms-now-all" else HALF[h]:
                        atom[pw][a].arrive()
                    yield
        issued[pw] = True

    def copies(pw):
        while not issued[pw] or copies_out[pw]:
            if copies_out[pw]:
                h, j = copies_out[pw].pop(0)
                for a in HALF[h]:
                    land(pw, a, j)
                full[h][pw].arrive()
            yield

    def boxes(pw):
        # Each box is its own asynchronous copy: any in flight may land next.
        while not issued[pw] or boxes_out[pw]:
            if boxes_out[pw]:
                a, j = boxes_out[pw].pop(rnd.randrange(len(boxes_out[pw])))
                land(pw, a, j)
                atom[pw][a].complete_tx(ATOM_BYTES)
            yield

    def atoms_read(g, b, atoms, i, reader, rope=None):
        h = "L" if atoms[0] < 4 else "R"

        def check():
            for a in atoms:
                if st["A"][b][a] != i:
                    return "%s reads block %s for %d in buffer %d's atom %d" % (reader, st["A"][b][a], i, b, a)
            if rope is not None and (st["rope"][b] or ())[:2] != rope:
                return "%s reads %s for %s in buffer %d's rope atom" % (reader, st["rope"][b], rope, b)
            return None
        g.read(check, lambda: need[h][b].discard(reader))

    def chain(g, x, i, h):
        # chain_l / chain_r: FULL of the half, then each atom's ATOM before
        # its wgmma group (the box path's bytes come atom by atom).
        ph = (i >> 1) & 1
        who = "wg %d" % x
        yield from wait(full[h][x], who, ph)
        for a in HALF[h]:
            if bug == "skip-atom-wait" and a == SKIP_ATOM:
                skip(atom[x][a], who)
            else:
                yield from wait(atom[x][a], who, ph)
            atoms_read(g, x, (a,), i, "wg%d chain %d" % (x, a), ("K", i) if a == 8 else None)
            g.commit()
            yield

    def chain_odd(g, i):
        for h in ("R", "L") if odd_r_first else ("L", "R"):
            yield from chain(g, 1, i, h)

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
        if st["A"][0][8] != i0 or st["rope"][0] != ("K", i0) or "wg0 chain 8" in need["R"][0]:
            raise AssertionError("P0 of pair %d stored over %s (block %s, readers %s)"
                                 % (q, st["rope"][0], st["A"][0][8], sorted(need["R"][0])))
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
            atoms_read(g, 0, V_HALF["L"], i0, "wg0 PV")
            pv(0, i0, i0)
            g.commit()
            yield
            g.wait(0)
            empty["L"][0].arrive()
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
                atoms_read(g, 1, V_HALF["L"], i0 + 1, "wg0 PV")
                pv(0, i0 + 1, st["px"][2])
                g.commit()
                yield
                if nxt:
                    # The PV, then chain_l's L_GROUPS groups: wg_wait<L_GROUPS>
                    # retires the PV, so buffer 1's left half is free.
                    yield from chain(g, 0, i0 + 2, "L")
                    g.wait({"pv-wait-5": L_GROUPS + 1, "wait-1": 1}.get(bug, L_GROUPS))
                    empty["L"][1].arrive()
                    yield
                    yield from chain(g, 0, i0 + 2, "R")
                    g.wait(0)
                else:
                    g.wait(0)
                    empty["L"][1].arrive()
                yield

    def wg1():
        g = Groups()
        if nb > 0:
            yield from join_q(1)
        if nb > 1:
            yield from chain_odd(g, 1)
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
                atoms_read(g, 0, V_HALF["R"], i1 - 1, "wg1 PV")
                atoms_read(g, 0, (8,), i1 - 1, "wg1 PV of P0", ("P0", q))
                pv(1, i1 - 1, st["rope"][0][2])
                g.commit()
                yield
                if bug == "early-empty-r0":
                    empty["R"][0].arrive()
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
                atoms_read(g, 1, V_HALF["R"], i1, "wg1 PV")
                pv(1, i1, new)
                g.commit()
                yield
                yield from pv0()
                g.wait(1)
                empty["R"][1].arrive()
                yield
                g.wait(0)
            else:
                yield from pv0()
                g.wait(0)
            if bug != "early-empty-r0":
                empty["R"][0].arrive()
            yield
            if nxt:
                yield from chain_odd(g, i1 + 2)
                g.wait(0)
                yield

    planted.interleave([gather(0), gather(1), copies(0), copies(1), boxes(0), boxes(1), wg0(), wg1()],
                       seed, 400000)
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


# Forms of the kernel that change only its speed: each must pass as well.
VARIANTS = (("odd-l-first", "MLA_PP_ODD_L_FIRST: an odd block's chain and gather left first"),
            ("odd-gather-l-first", "the parity-1 gather left first, its chain right first"),
            ("wait-1", "wg_wait<1> before EMPTY_L(1): the PV and three chain groups retired"))


def variants():
    for v, what in VARIANTS:
        why = check(v)
        if why:
            print("pp_protocol: variant %s fails: %s (%s)" % (v, why, what))
            return 1
        print("pp_protocol: variant %-18s holds (%s)" % (v, what))
    return None


if __name__ == "__main__":
    sys.exit(planted.main(sys.argv, __doc__, "the protocol and its variants hold and every planted bug is caught",
                          "pp_protocol", check, "12 block counts x 300 schedules (cp.async, box and mixed paths): "
                          "no deadlock, no stale read or early overwrite, no barrier two phases ahead",
                          ("gather-skips-empty-r", "early-empty-r0", "p0-before-sc1", "pv-wait-5", "skip-atom-wait",
                           "atoms-now-all", "box-plain-arrive"), "bugs", first=variants))
