"""What the CPU model checks of hip/tests share: a clean run must pass, then
each planted bug must make the same check fail, so that a pass is not the
word of a blind check; and, for the protocol models, mbarriers, random
interleavings of the actors and the sweep over block counts and schedules."""
import random


def usage(argv, doc, what):
    """None when the model script got no arguments; else prints its doc
    string and usage (what: the condition of exit 0) and returns the exit
    status, 0 for -h / --help and 2 for anything else."""
    if len(argv) <= 1:
        return None
    print(doc)
    print("usage: %s  (no arguments; exit 0 when %s)" % (argv[0].rsplit("/", 1)[-1], what))
    return 0 if argv[1] in ("-h", "--help") else 2


def run(tag, check, clean_msg, bugs, noun):
    """check(bug) returns None when everything holds, else why not; bug None
    is the code as written. Prints one line per run and the tally; returns
    the exit status (0: clean passes and every bug is caught)."""
    why = check(None)
    if why:
        print("%s: fails as written: %s" % (tag, why))
        return 1
    print("%s: %s" % (tag, clean_msg))
    missed = 0
    for bug in bugs:
        why = check(bug)
        print("%s: planted %-20s %s" % (tag, bug, "caught (" + why + ")" if why else "MISSED"))
        missed += why is None
    print("%s: %d of %d planted %s caught" % (tag, len(bugs) - missed, len(bugs), noun))
    return 1 if missed else 0


def main(argv, doc, what, tag, check, clean_msg, bugs, noun, first=None):
    """A model script's whole main: usage (what: the condition of exit 0),
    then first() when given (None when it holds, else the exit status, its
    reason printed), then run. Returns the exit status."""
    st = usage(argv, doc, what)
    if st is None and first is not None:
        st = first()
    return st if st is not None else run(tag, check, clean_msg, bugs, noun)


class MBar:
    """An mbarrier of the protocol models: a phase completes once `count`
    arrivals are in and its transaction count (raised by expect_tx
    arrivals, lowered by complete_tx: st.async bytes, in either order with
    the arming arrival) is back at zero; waiters name a phase by parity."""

    def __init__(self, count):
        self.count = count
        self.pending = count
        self.tx = 0
        self.phase = 0

    def arrive(self, expect_tx=0):
        self.tx += expect_tx
        self.pending -= 1
        if self.pending < 0:
            raise AssertionError("more arrivals than the phase counts")
        self._step()

    def complete_tx(self, n):
        self.tx -= n
        self._step()

    def _step(self):
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count

    def done(self, parity):
        # try_wait.parity: the phase of that parity has completed.
        return (self.phase & 1) != parity


def wait(mb, parity):
    """A generator that yields until phase `parity` of mb has completed."""
    while not mb.done(parity):
        yield


def interleave(actors, seed, limit):
    """Steps the actor generators in a random order (seeded) until all have
    finished; more than `limit` steps is a deadlock."""
    rnd = random.Random(seed)
    alive = list(range(len(actors)))
    steps = 0
    while alive:
        k = rnd.choice(alive)
        try:
            next(actors[k])
        except StopIteration:
            alive.remove(k)
        steps += 1
        if steps > limit:
            raise AssertionError("deadlock")


def sweep(run, counts, seeds, bug):
    """The first failure of run(n, seed, bug) over the counts and seeds, as a
    message, or None."""
    for n in counts:
        for seed in seeds:
            try:
                run(n, seed, bug)
            except AssertionError as e:
                return "nb %d seed %d: %s" % (n, seed, e)
    return None
