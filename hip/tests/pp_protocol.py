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

A block lands by one of two paths, which the gather picks per block (its
run start: the first slot when the slots run contiguously, else -1) and
the consumer cannot tell apart. The cp.async path: the gather waits for
EMPTY of block j - 2's half, issues the copies, which arrive on FULL when
they land (cp.async.mbarrier.arrive), and its thread 0 arrives on the
half's ATOM barriers at once, so FULL carries the bytes. The box path:
each atom's box copy is issued by one thread that arms the atom's
ATOM[b][a] (count 1) with the atom's bytes, which land on it later, atom
by atom in any order; FULL gets plain arrivals of the gather's 64 threads
(FULL says issued, or to come, not landed). A parity's first block (j < 2)
has its boxes issued by the gather's thread 0 (the other 63 threads may
arrive on FULL before or after its issues, so FULL completes at a random
point of them). A later block's (j >= 2) come from the compute warpgroup
that frees block j - 2's half (land): the gather publishes each block's
run start two blocks ahead in a shared ring Runs, two entries a parity,
Runs[2 pw + ((k >> 1) & 1)] (before its loop run(pw + 2), after the halves
of block j run(j + 4), over block j's entry), and at each of the four
release points (warpgroup 0's EMPTY_L(0) -> block 2q + 2's left half,
EMPTY_L(1) -> 2q + 3's left; warpgroup 1's EMPTY_R(1) -> 2q + 3's right,
EMPTY_R(0) -> 2q + 2's right) the warpgroup's warp 0 reads block k's entry
before its EMPTY arrival, all four warps arrive and every warp then waits
on that EMPTY itself (all four warps' reads retired; at every release
point, box block or not), and for a box block its thread 0, the issuer,
arms the half's ATOM barriers and issues its boxes; the gather, after its
own wait on that EMPTY, only arrives on FULL. Either way the S chain waits
FULL of a half, then, atom by atom, ATOM of that atom before its wgmma,
one commit group per atom (four in the left half, five in the right).
Warpgroup 0's chain of block 2q + 2 goes behind its PV of block 2q + 1's
left half, so it waits until at most the left chain's four groups are
pending before it frees buffer 1's left half (EMPTY_L(1)). An odd block's
chain reads the right half first (warpgroup 1 itself frees buffer 1's
right half, earlier than warpgroup 0 frees the left), and the gather of
parity 1 waits for and copies the right half first too; parity 0 keeps
left, then right.

Actors, as generators that yield wherever another may run: the gather of
each parity (run starts, then per half: wait EMPTY of block j - 2, then
the copies, its first block's boxes or only FULL, with the arrivals above;
then the next run start published); the cp.async copies of each parity,
landing in issue order and arriving on FULL; the box copies of each
parity, whoever issued them, one landing at a time in random order, each
completing its atom's bytes; and the two compute warpgroups, in the
kernel's order of waits, arrivals, wgmma issues, wgmma waits and stores.
Which path each block takes is drawn per schedule: every block gathered
(no tensor map), every block boxed, or a random mix, so that runs of box
and gathered blocks alternate. One actor stands for a thread group: every
barrier counts all the threads of the group that arrives on it, so no warp
can run ahead of its group's arrival; on the box path the gather's FULL
completes at a random point of thread 0's issues, as above. The one place
where a warpgroup's warps part is a release point: there its four warps
run as four interleaved actors, each retiring its own wgmma groups (a
warp's wgmma.wait_group retires only its own reads of the half), arriving
on EMPTY (count 4: a warp each) and waiting on it, warp 0 with its read of
Runs and its issues among them; the warpgroup goes on once all four are
through. (A warp that, in the kernel, runs on while thread 0 issues only
reaches a barrier that counts warp 0 too, so that lag is a delay, nothing
more. Where there is nothing to issue, no one looks between the warps'
retirements and EMPTY's completion, and the four go as one step.)
mbarriers are planted.MBar phase counters (with transaction bytes) waited
by parity; each waiter also counts the phases it has waited, and a barrier
found two phases past that count (parity aliasing) is a failure. Each
phase also carries what its arrivals knew: an arriving actor (a warp at a
release point) releases the Runs writes and reads it has made or acquired,
a waiter acquires what the phase it waited for collected (the copies'
cp.async arrivals and the boxes' bytes release nothing), so that the ring
is checked for the ordering the kernel's argument gives it, not only for
the values a schedule happens to see. The softmax is kept symbolically:
which block's running max each O, P and factor is at.

For 0-11 blocks and 300 random schedules each it checks: no deadlock; no
half-buffer (or PX) is copied over while a reader still needs its block
(from the copies' issue, since a copy may write at any time until it
lands; the boxes a compute warpgroup issues included, against every warp's
reads); every read (an atom of the S chain, V's atoms of a half, P in the
rope atom or PX, sM / sSc0 / sSc1) sees the block or pair it expects, at
issue and when its wgmma group completes; every Runs read finds the entry
of the block it asks for, its write ordered before the read by barriers,
and every Runs write replaces an entry both readers have read, their reads
ordered before the write; every P meets an O at P's own max; each
warpgroup adds every block once, pair by pair (warpgroup 1 adds 2q + 1
before 2q: both are at the pair's max); the parities in the kernel name
the phases the waiters mean. Four variants of the kernel must hold as
well: MLA_PP_ODD_L_FIRST (chain and gather of an odd block left first),
the parity-1 gather left first under a right-first chain (only slower),
wg_wait<1> before EMPTY_L(1) (retires more than the PV: only slower), and
MLA_PP_GATHER_BOXES (the gather issues every box block, as in step 42; the
compute warpgroups neither read Runs, nor wait on EMPTY, nor issue; its
schedules with every block gathered would be the clean run's, so it runs
the other two thirds). Then it plants one protocol bug at a time (BUGS)
and requires each to be caught, so that a clean run is not a blind model.
The kernel is written by hand from the same steps; a change to one belongs
in the other."""
import random
import sys

import planted

ATOM_BYTES = 64 * 128                    # PP_ATOM: a box copy's bytes
HALF = {"L": (0, 1, 2, 3), "R": (4, 5, 6, 7, 8)}
V_HALF = {"L": (0, 1, 2, 3), "R": (4, 5, 6, 7)}  # the atoms a PV reads
L_GROUPS = len(HALF["L"])                # chain_l's commit groups (one per atom)
SKIP_ATOM = 2                            # the atom whose wait "skip-atom-wait" drops
WARPS = 4                                # a warpgroup's warps; warp 0 issues its boxes


class Know:
    """What an actor knows of the Runs ring, as bits: block k's run start
    written (bit 3k), read by warpgroup x's issuer (bit 3k + 1 + x)."""
    __slots__ = ("v",)

    def __init__(self, v=0):
        self.v = v


def written(k):
    return 1 << 3 * k


def read_by(k, x):
    return 1 << 3 * k + 1 + x


class Bar(planted.MBar):
    """An mbarrier whose phases also carry knowledge: each arrival adds what
    the arriving actor knows (its Know) to the phase it completes, and a
    waiter of that phase acquires it (wait below)."""

    def __init__(self, name, count):
        super().__init__(count)
        self.name, self.waits, self.cur, self.facts = name, {}, 0, {}

    def arrive(self, expect_tx=0, know=None):
        if know is not None:
            self.cur |= know.v
        p = self.phase
        planted.MBar.arrive(self, expect_tx)
        if self.phase != p:
            self.facts[p], self.cur = self.cur, 0

    def complete_tx(self, n):
        p = self.phase
        planted.MBar.complete_tx(self, n)
        if self.phase != p:
            self.facts[p], self.cur = self.cur, 0


def wait(mb, who, parity, know=None):
    """mbarrier.try_wait.parity as the kernel spins on it, plus the checks
    that plain parity cannot make: the kernel's parity names the next phase
    this waiter has not yet waited for, and that phase's successor has not
    completed already (it would look pending again). The waiter (its
    knowledge `know`) acquires what the phase's arrivals released."""
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
    if know is not None:
        know.v |= mb.facts[k]


def skip(mb, who):
    """A wait the kernel leaves out: its parity formula still names the
    next phase, so the waiter's count moves on without looking."""
    mb.waits[who] = mb.waits.get(who, 0) + 1


def fresh(readers):
    """A half's (or PX's) readers, each with the warps whose reads of it
    have not yet retired."""
    return {r: set(range(WARPS)) for r in readers}


def drop(need, reader, w):
    """Warp w's read (all warps' for w None) retired."""
    if w is None:
        need.pop(reader, None)
    elif reader in need:
        need[reader].discard(w)
        if not need[reader]:
            del need[reader]


class Groups:
    """A warpgroup's wgmma commit groups: a read may happen any time between
    its issue and the wait that retires its group, so the data must be
    right at both ends and its readers are released only at the wait.
    Groups retire in commit order (wgmma.wait_group n: at most n pending).
    A wait just before a release point leaves the retirement to each warp
    (lag: land retires them warp by warp)."""

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

    def wait(self, n, lag=None):  # wgmma.wait_group n
        while len(self.groups) > n:
            for check, release in self.groups.pop(0):
                if lag is not None:
                    lag.append((check, release))
                    continue
                why = check()
                if why:
                    raise AssertionError(why + " (changed under the wgmma)")
                release(None)


def needs(h, b):
    """Who must read a freshly issued half h of buffer b before it may be
    copied over: its owner's chain atom by atom (each atom's group retires
    on its own), and the PVs of V's half (and of P(2q) in buffer 0's rope)."""
    chain = {"wg%d chain %d" % (b, a) for a in HALF[h]}
    if h == "L":
        return chain | {"wg0 PV"}
    return chain | {"wg1 PV"} | ({"wg1 PV of P0"} if b == 0 else set())


def run(nb, seed, bug=None):
    rnd = random.Random(1_000_003 * seed + nb + 1)  # the paths, FULL's point, the warps and the boxes' order
    mode = seed % 3
    box = [mode == 1 or (mode == 2 and rnd.random() < 0.5) for _ in range(nb)]
    gather_boxes = bug == "gather-boxes"  # MLA_PP_GATHER_BOXES
    # One arrival per actor: each stands for all the threads a barrier
    # counts; EMPTY counts the releasing warpgroup's four warps.
    full = {h: [Bar("FULL_%s[%d]" % (h, b), 1) for b in (0, 1)] for h in "LR"}
    empty = {h: [Bar("EMPTY_%s[%d]" % (h, b), WARPS) for b in (0, 1)] for h in "LR"}
    atom = [[Bar("ATOM[%d][%d]" % (b, a), 1) for a in range(9)] for b in (0, 1)]
    qready, sc0, sc1 = Bar("QREADY", 2), Bar("SC0", 1), Bar("SC1", 1)
    p0r, p1r = Bar("P0R", 1), Bar("P1R", 1)
    npair = (nb + 1) >> 1
    st = {
        "A": [[None] * 9, [None] * 9],         # block in each atom (None: being written)
        "rope": [None, None],                  # atom 8: ("K", block) or ("P0", pair, max)
        "px": None,                            # ("P1", pair, max)
        "sM": None, "sSc0": None, "sSc1": None,  # ("M", block) / (from block, to block)
    }
    need = {"L": [{}, {}], "R": [{}, {}], "px": {}}
    copies_out = [[], []]  # cp.async halves issued, not landed: (half, block)
    boxes_out = [[], []]   # box copies issued, not landed: (atom, block)
    otag = [-1, -1]        # the block whose running max each O is at
    order = ([], [])
    odd_r_first = bug != "odd-l-first"
    # Runs[2 pw + slot]: (block, box?) as the gather published it; what
    # each actor knows of the ring (Know).
    runs = [[None, None], [None, None]]
    reads = set()
    know = {who: Know() for who in ("gather 0", "gather 1", "wg 0", "wg 1")}

    def publish(pw, k):
        # publish_run: gather thread 0 writes block k's run start over
        # block k - 4's, which both its readers must have read, ordered
        # before this write.
        kw = know["gather %d" % pw]
        old = runs[pw][(k >> 1) & 1]
        if old is not None and 2 <= old[0] < nb and not gather_boxes:
            for x in (0, 1):
                if not kw.v & read_by(old[0], x):
                    raise AssertionError("gather %d publishes block %d's run start over block %d's %s"
                                         % (pw, k, old[0], "before wg %d read it" % x if (old[0], x) not in reads
                                            else "with wg %d's read of it not ordered before" % x))
        runs[pw][(k >> 1) & 1] = (k, k < nb and box[k])
        kw.v |= written(k)

    def read_run(x, k, kw):
        # The issuer's read of block k's entry: its block's, and published
        # before it by a chain of barriers.
        e = runs[k & 1][(k >> 1) & 1]
        if e is None or e[0] != k:
            raise AssertionError("wg %d's issuer reads block %s's run start for block %d"
                                 % (x, e and e[0], k))
        if not kw.v & written(k):
            raise AssertionError("wg %d's issuer reads block %d's run start with its write not ordered before"
                                 % (x, k))
        kw.v |= read_by(k, x)
        reads.add((k, x))
        return e[1]

    def overwrite(h, b, j, what):
        # From the issue on, a copy may write any byte of its half.
        if need[h][b]:
            raise AssertionError("block %d's %s overwrite buffer %d's %s half while %s still need block %s"
                                 % (j, what, b, h, sorted(need[h][b]), st["A"][b][HALF[h][0]]))
        for a in HALF[h]:
            st["A"][b][a] = None
        if h == "R":
            st["rope"][b] = None
        need[h][b] = fresh(needs(h, b))

    def put(b, a, j):
        st["A"][b][a] = j
        if a == 8:
            st["rope"][b] = ("K", j)

    def arm(b, a, j, kw):
        # mbarrier.arrive.expect_tx, then the atom's box copy.
        atom[b][a].arrive(expect_tx=0 if bug == "box-plain-arrive" else ATOM_BYTES, know=kw)
        boxes_out[b].append((a, j))

    def gather(pw):
        who = "gather %d" % pw
        kw = know[who]
        late = bug == "late-publish"
        first = "R" if pw == 1 and odd_r_first and bug != "odd-gather-l-first" else "L"
        yield  # slots(pw), run_of(pw), run_of(pw + 2): global reads
        if not late:
            publish(pw, pw + 2)
        for j in range(pw, nb, 2):
            ph = ((j >> 1) - 1) & 1  # block j - 2's release
            for h in (first, "R" if first == "L" else "L"):
                if j >= 2 and not (bug == "gather-skips-empty-r" and h == "R"):
                    yield from wait(empty[h][pw], who, ph, kw)
                if box[j] and j >= 2 and not gather_boxes:
                    # The warpgroup that freed the half issues the boxes.
                    full[h][pw].arrive(know=kw)
                    if bug == "gather-atoms-too":
                        for a in HALF[h]:
                            atom[pw][a].arrive(know=kw)
                    yield
                elif box[j]:
                    overwrite(h, pw, j, "boxes")
                    at = rnd.randrange(len(HALF[h]) + 1)  # FULL's 64th arrival
                    for n, a in enumerate(HALF[h] + (None,)):
                        if n == at:
                            full[h][pw].arrive(know=kw)
                            yield
                        if a is not None:
                            arm(pw, a, j, kw)
                            yield
                else:
                    overwrite(h, pw, j, "copies")
                    copies_out[pw].append((h, j))
                    yield
                    for a in range(9) if bug == "atoms-now-all" else HALF[h]:
                        atom[pw][a].arrive(know=kw)
                    yield
            if late:
                publish(pw, j + 2)  # after block j's arrivals, not block j - 2's
            yield  # slots(j + 2), run_of(j + 4)
            if not late:
                publish(pw, j + 4)

    def copies(pw):
        # Two halves for each gathered block of the parity, in issue order.
        left = 2 * (len(box[pw::2]) - sum(box[pw::2]))
        while left:
            if copies_out[pw]:
                h, j = copies_out[pw].pop(0)
                for a in HALF[h]:
                    put(pw, a, j)
                full[h][pw].arrive()
                left -= 1
            yield

    def boxes(pw):
        # Each box is its own asynchronous copy: any in flight may land next.
        # Nine for each box block of the parity, whoever issues them.
        left = 9 * sum(box[pw::2])
        while left:
            if boxes_out[pw]:
                a, j = boxes_out[pw].pop(rnd.randrange(len(boxes_out[pw])))
                put(pw, a, j)
                atom[pw][a].complete_tx(ATOM_BYTES)
                left -= 1
            yield

    def land(x, h, k, ph, lag):
        # Warpgroup x frees its half h of block k - 2's buffer (EMPTY, phase
        # ph) and issues block k's boxes there when it is a box block. Its
        # four warps each retire their reads (lag); warp 0 reads block k's
        # run start before its arrival; each arrives on EMPTY, then waits
        # until all four arrived (not under MLA_PP_GATHER_BOXES), and thread
        # 0 issues.
        b = k & 1
        e, kw = empty[h][b], know["wg %d" % x]
        ks = [Know(kw.v) for _ in range(WARPS)]  # what each warp knows
        reading = k < nb and not gather_boxes
        late = reading and bug == "run-after-empty"
        run_box = reading and not late and read_run(x, k, ks[0])

        def retire(w):
            for check, release in lag:
                why = check()
                if why:
                    raise AssertionError(why + " (changed under the wgmma)")
                release(w)

        def wait_all(w):
            who = "wg %d warp %d" % (x, w)
            if bug == "issue-before-empty" and w == 0:
                skip(e, who)
            elif not gather_boxes:
                yield from wait(e, who, ph, ks[w])

        if not (run_box or late):
            # Nothing to issue: no one looks between the warps' retirements
            # and EMPTY's completion, so they go as one step.
            retire(None)
            for w in range(WARPS):
                e.arrive(know=ks[w])
            for w in range(WARPS):
                yield from wait_all(w)
            yield
        else:
            def warp(w):
                retire(w)
                e.arrive(know=ks[w])
                yield
                box_k = run_box
                if late and w == 0:
                    box_k = read_run(x, k, ks[0])
                    yield
                yield from wait_all(w)
                if w == 0 and box_k:
                    overwrite(h, b, k, "boxes (wg %d)" % x)
                    for a in HALF[h]:
                        arm(b, a, k, ks[0])

            warps = [warp(w) for w in range(WARPS)]
            while warps:
                w = rnd.choice(warps)
                try:
                    next(w)
                except StopIteration:
                    warps.remove(w)
                yield
        for kn in ks:
            kw.v |= kn.v

    def atoms_read(g, b, atoms, i, reader, rope=None):
        h = "L" if atoms[0] < 4 else "R"

        def check():
            for a in atoms:
                if st["A"][b][a] != i:
                    return "%s reads block %s for %d in buffer %d's atom %d" % (reader, st["A"][b][a], i, b, a)
            if rope is not None and (st["rope"][b] or ())[:2] != rope:
                return "%s reads %s for %s in buffer %d's rope atom" % (reader, st["rope"][b], rope, b)
            return None
        g.read(check, lambda w: drop(need[h][b], reader, w))

    def chain(g, x, i, h):
        # chain_l / chain_r: FULL of the half, then each atom's ATOM before
        # its wgmma group (the box path's bytes come atom by atom).
        ph = (i >> 1) & 1
        who = "wg %d" % x
        kw = know[who]
        yield from wait(full[h][x], who, ph, kw)
        for a in HALF[h]:
            if bug == "skip-atom-wait" and a == SKIP_ATOM:
                skip(atom[x][a], who)
            else:
                yield from wait(atom[x][a], who, ph, kw)
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
        p0r.arrive(know=know["wg 0"])
        yield

    def join_q(x):
        # Both compute warpgroups load Q and meet on QREADY.
        qready.arrive(know=know["wg %d" % x])
        yield
        yield from wait(qready, "wg %d" % x, 0, know["wg %d" % x])

    def wg0():
        g = Groups()
        kw = know["wg 0"]
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
            sc0.arrive(know=kw)
            rescale(0, (m_old[1], i0), "block %d" % i0)
            yield
            atoms_read(g, 0, V_HALF["L"], i0, "wg0 PV")
            pv(0, i0, i0)
            g.commit()
            yield
            lag = []
            g.wait(0, lag)
            yield from land(0, "L", i0 + 2, ph, lag)
            if bug == "p0-before-sc1":
                yield from store_p0(q, i0)
            yield from wait(sc1, "wg 0", ph, kw)
            s1 = st["sSc1"]
            if s1 != (i0, i0 + 1 if has1 else i0):
                raise AssertionError("wg 0 reads sSc1 %s in pair %d" % (s1, q))
            yield
            if bug != "p0-before-sc1":
                yield from store_p0(q, s1[1])
            rescale(0, s1, "block %d" % (i0 + 1))
            if has1:
                yield from wait(p1r, "wg 0", ph, kw)
                g.read(lambda: None if (st["px"] or ())[:2] == ("P1", q) else
                       "wg 0 reads %s in PX for pair %d's P1" % (st["px"], q),
                       lambda w: drop(need["px"], "wg0 PV", w))
                atoms_read(g, 1, V_HALF["L"], i0 + 1, "wg0 PV")
                pv(0, i0 + 1, st["px"][2])
                g.commit()
                yield
                lag = []
                if nxt:
                    # The PV, then chain_l's L_GROUPS groups: wg_wait<L_GROUPS>
                    # retires the PV, so buffer 1's left half is free.
                    yield from chain(g, 0, i0 + 2, "L")
                    g.wait({"pv-wait-5": L_GROUPS + 1, "wait-1": 1}.get(bug, L_GROUPS), lag)
                    yield from land(0, "L", i0 + 3, ph, lag)
                    yield from chain(g, 0, i0 + 2, "R")
                    g.wait(0)
                else:
                    g.wait(0, lag)
                    yield from land(0, "L", i0 + 3, ph, lag)
                yield

    def wg1():
        g = Groups()
        kw = know["wg 1"]
        if nb > 0:
            yield from join_q(1)
        if nb > 1:
            yield from chain_odd(g, 1)
            g.wait(0)
            yield
        for q in range(npair):
            i1 = 2 * q + 1
            has1, nxt, ph = i1 < nb, i1 + 2 < nb, q & 1
            yield from wait(sc0, "wg 1", ph, kw)
            m, s0 = st["sM"], st["sSc0"]
            if m != ("M", i1 - 1) or s0 != (i1 - 2, i1 - 1):
                raise AssertionError("wg 1 reads sM %s, sSc0 %s in pair %d" % (m, s0, q))
            yield
            new = i1 if has1 else i1 - 1
            st["sM"], st["sSc1"] = ("M", new), (i1 - 1, new)
            yield
            sc1.arrive(know=kw)
            rescale(1, (s0[0], new), "sSc0 x sc")
            yield

            def pv0():
                yield from wait(p0r, "wg 1", ph, kw)
                atoms_read(g, 0, V_HALF["R"], i1 - 1, "wg1 PV")
                atoms_read(g, 0, (8,), i1 - 1, "wg1 PV of P0", ("P0", q))
                pv(1, i1 - 1, st["rope"][0][2])
                g.commit()
                yield
                if bug == "early-empty-r0":
                    yield from land(1, "R", i1 + 1, ph, [])

            # early-empty-r0 has freed the half already: its reads retire
            # with the group, unseen by a release point.
            lag = None if bug == "early-empty-r0" else []
            if has1:
                if need["px"]:
                    raise AssertionError("P1 of pair %d overwrites PX while %s read pair %d's"
                                         % (q, sorted(need["px"]), q - 1))
                st["px"] = None
                yield
                st["px"], need["px"] = ("P1", q, new), fresh({"wg0 PV"})
                p1r.arrive(know=kw)
                yield
                atoms_read(g, 1, V_HALF["R"], i1, "wg1 PV")
                pv(1, i1, new)
                g.commit()
                yield
                yield from pv0()
                lag1 = []
                g.wait(1, lag1)
                yield from land(1, "R", i1 + 2, ph, lag1)
                g.wait(0, lag)
            else:
                yield from pv0()
                g.wait(0, lag)
            if bug != "early-empty-r0":
                yield from land(1, "R", i1 + 1, ph, lag)
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
    """The first failure over all block counts and schedules, or None.
    MLA_PP_GATHER_BOXES differs only where blocks are boxed: its schedules
    with every block gathered (seed % 3 == 0) would be the clean run's."""
    return planted.sweep(run, range(12), [s for s in range(300) if s % 3 or bug != "gather-boxes"], bug)


# Forms of the kernel that change only its speed: each must pass as well.
VARIANTS = (("odd-l-first", "MLA_PP_ODD_L_FIRST: an odd block's chain and gather left first"),
            ("odd-gather-l-first", "the parity-1 gather left first, its chain right first"),
            ("wait-1", "wg_wait<1> before EMPTY_L(1): the PV and three chain groups retired"),
            ("gather-boxes", "MLA_PP_GATHER_BOXES: the gather issues every block's boxes"))

# Planted protocol bugs, each to be caught.
BUGS = ("gather-skips-empty-r",  # the gather copies the right half without waiting EMPTY_R
        "early-empty-r0",        # warpgroup 1 frees buffer 0's right half before its PV retired
        "p0-before-sc1",         # P(2q) stored before block 2q + 1's factor is known
        "pv-wait-5",             # wg_wait<5> before EMPTY_L(1): the PV still pending
        "skip-atom-wait",        # one atom's ATOM wait dropped from the chain
        "atoms-now-all",         # a gathered half arrives on all nine ATOM barriers
        "box-plain-arrive",      # a box copy's arming arrival without its bytes
        "run-after-empty",       # the issuer reads Runs after its EMPTY arrival
        "issue-before-empty",    # the issuer issues without waiting on EMPTY (the other warps)
        "late-publish",          # run(j + 4) published after block j + 2's halves
        "gather-atoms-too")      # the gather arrives on ATOM for a later box block too


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
                          "no deadlock, no stale read or early overwrite, no unordered run start, "
                          "no barrier two phases ahead", BUGS, "bugs", first=variants))
