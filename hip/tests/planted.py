"""What the CPU model checks of hip/tests share: a clean run must pass, then
each planted bug must make the same check fail, so that a pass is not the
word of a blind check."""


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
