#!/usr/bin/python3
"""Regression corpus of issue 42's attacks on the C tools, one class per run.

    attacks_test.py CLASS --fixture MLA_FIXTURE --validate MLA_VALIDATE
                    --needle MLA_NEEDLE --data DATA_DIR --work WORK_DIR

CLASS (each a ctest, label 'attacks'):
  write-efbig     every writer under a file-size limit (ulimit -f: EFBIG):
                  mla-fixture generate, mla-validate --dump/--report/--json/
                  --junit/--bias-noise, mla-needle captured. Each must exit 2
                  naming the file and the errno, leave no temporary behind and
                  the previous file byte for byte.
  needle-guarded  mla-needle --in on a file whose one pool chunk inflates to
                  256 MiB while the pool declares 2.9 MB: refused or read by
                  the guarded reader, never a crash, RSS of the whole tree
                  under the budget.
  budget          --max-memory is the run's: a file declaring 160 MiB under
                  --max-memory 256M is refused (its two copies and the reader's
                  room do not fit), and the tree's RSS stays under the budget;
                  under 512M it is read, the tree's RSS under 512 MiB.
  dump-input      --dump DIR holding the input: refused, the input (and its
                  /expected) intact; also through another name (a hard link).
  dump-collision  two inputs with one base name and --dump: refused up front.
  symlink         a symbolic link planted at report.md, at --json, at
                  --bias-noise and at --junit: refused, the link's target
                  untouched; no predictable temporary name.
  html-escape     a fixture named and described with markup: report.html
                  holds no unescaped '<' from it (SVG <title> included).
  concurrent      four runs writing one report directory at once, three
                  rounds: each round leaves report.{json,md,html} from one
                  and the same run.
  nothing-judged  every result N/A: exit 3; a judged run exits 0.
Exit 0 pass, 1 fail (each failed check printed), 77 skipped (no h5py).
"""
import argparse
import glob
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time

try:
    import h5py
    import numpy as np
except ImportError:
    print("skipped: this python lacks h5py/numpy")
    sys.exit(77)

FAILS = []


def check(ok, what, detail=""):
    print("%s %s%s" % ("ok  " if ok else "FAIL", what, (": " + detail) if detail and not ok else ""))
    if not ok:
        FAILS.append(what)


def fsize_limit(nbytes):
    def pre():
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    return pre


def run(cmd, limit=None, timeout=120):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       errors="replace", preexec_fn=limit, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def tree_rss_peak(cmd, timeout=120):
    """Run cmd; return (rc, output, peak of the summed RSS of it and its
    children in MiB), sampling /proc every 5 ms."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         errors="replace")
    peak = [0]
    done = threading.Event()

    def rss(pid):
        try:
            with open("/proc/%d/statm" % pid) as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            return 0

    def kids(pid):
        out = []
        for t in glob.glob("/proc/%d/task/*/children" % pid):
            try:
                out += [int(x) for x in open(t).read().split()]
            except (OSError, ValueError):
                pass
        return out

    def sample():
        while not done.is_set():
            pids, total, seen = [p.pid], 0, set()
            while pids:
                q = pids.pop()
                if q in seen:
                    continue
                seen.add(q)
                total += rss(q)
                pids += kids(q)
            peak[0] = max(peak[0], total)
            time.sleep(0.005)

    th = threading.Thread(target=sample)
    th.start()
    try:
        out, _ = p.communicate(timeout=timeout)
    finally:
        done.set()
        th.join()
    return p.returncode, out, peak[0] / 2**20


def crashed(rc):
    return rc < 0 or rc > 3


def snapshot(d):
    return {n: open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d))
            if os.path.isfile(os.path.join(d, n))}


# ---- classes ----

def c_write_efbig(a, w):
    lim = fsize_limit(128)  # every file these writers produce is larger
    # mla-fixture generate --out over an existing file
    out = os.path.join(w, "gen")
    os.makedirs(out)
    target = os.path.join(out, "k3-l1.h5")
    rc, o = run([a.fixture, "generate", "--name", "k3-l1", "--out", target])
    check(rc == 0, "generate (no limit)", o)
    before = snapshot(out)
    rc, o = run([a.fixture, "generate", "--name", "k3-l1", "--out", target], lim)
    check(rc == 2 and target in o and "errno 27" in o,
          "mla-fixture generate under ulimit -f: exit 2 naming the file and errno 27",
          "exit %d: %s" % (rc, o[-400:]))
    check(snapshot(out) == before, "mla-fixture generate: old file intact, no temporary left",
          str(sorted(os.listdir(out))))
    # mla-validate's writers
    src = os.path.join(a.data, "k3-l1.h5")
    d = os.path.join(w, "val")
    os.makedirs(d)
    outs = {"--dump": os.path.join(d, "dump"), "--report": os.path.join(d, "rep"),
            "--json": os.path.join(d, "r.json"), "--junit": os.path.join(d, "r.xml"),
            "--bias-noise": os.path.join(d, "noise.md")}
    base = [a.validate, "--quiet", "--backend", "reference"]
    for opt, path in outs.items():
        rc, o = run(base + [opt, path, src])
        check(rc == 0, "%s (no limit)" % opt, o[-400:])
        before = snapshot(d) if os.path.isfile(path) else snapshot(path)
        rc, o = run(base + [opt, path, src], lim)
        check(rc == 2 and path in o and "errno 27" in o,
              "mla-validate %s under ulimit -f: exit 2 naming the file and errno 27" % opt,
              "exit %d: %s" % (rc, o[-400:]))
        after = snapshot(d) if os.path.isfile(path) else snapshot(path)
        check(after == before, "mla-validate %s: old files intact, no temporary left" % opt,
              str(sorted(set(after) ^ set(before))))
    # mla-needle captured writes fixtures too
    nd = os.path.join(w, "needle")
    os.makedirs(nd)
    rc, o = run([a.needle, "captured", "--in", os.path.join(a.data, "needle-k3-small.h5"),
                 "--mutant", "none", "--dir", nd], lim)
    check(rc == 2 and "errno 27" in o and not crashed(rc),
          "mla-needle captured under ulimit -f: exit 2 with errno 27", "exit %d: %s" % (rc, o[-400:]))
    check(os.listdir(nd) == [], "mla-needle captured: no temporary left", str(os.listdir(nd)))


def inflating_needle(a, w, mib):
    """needle-k3-small.h5 with its pool stored as one deflate chunk that
    inflates to `mib` MiB while the dataset declares its own (small) extent."""
    path = os.path.join(w, "inflate.h5")
    shutil.copyfile(os.path.join(a.data, "needle-k3-small.h5"), path)
    import zlib
    with h5py.File(path, "r+") as f:
        old = f["inputs/kv_buffer"]
        data, attrs = old[()], dict(old.attrs)
        del f["inputs/kv_buffer"]
        rows = (mib << 20) // (data.shape[1] * data.shape[2] * 2)
        d = f.create_dataset("inputs/kv_buffer", shape=data.shape, dtype="<u2",
                             maxshape=(None,) + data.shape[1:], chunks=(rows,) + data.shape[1:],
                             compression="gzip")
        for k, v in attrs.items():
            d.attrs[k] = v
        z = zlib.compressobj(9)
        chunk = np.zeros((rows,) + data.shape[1:], "<u2")
        chunk[: data.shape[0]] = data
        blob = z.compress(chunk.tobytes()) + z.flush()
        d.id.write_direct_chunk((0, 0, 0), blob)
    return path


def sanitized(tool):
    """An AddressSanitizer build: the reader's child does not cap its address
    space there (ASan reserves terabytes of shadow), so the memory classes
    do not apply."""
    with open(tool, "rb") as f:
        return b"__asan_init" in f.read()


def c_needle_guarded(a, w):
    if sanitized(a.needle):
        print("skipped: AddressSanitizer build (no address-space cap, RSS includes shadow)")
        sys.exit(77)
    path = inflating_needle(a, w, 256)
    rc, o, peak = tree_rss_peak([a.needle, "map", "--max-memory", "192M", "--in", path])
    check(not crashed(rc) and rc == 2 and path in o,
          "mla-needle map on a pool chunk inflating to 256 MiB, --max-memory 192M: exit 2 "
          "naming the file", "exit %d: %s" % (rc, o[-400:]))
    check(peak < 192, "mla-needle map: the tree's RSS stays under 192 MiB", "%.0f MiB" % peak)
    rc, o = run([a.needle, "map", "--in", os.path.join(a.data, "needle-k3-small.h5")])
    check(rc == 0 and "covered" in o, "mla-needle map on the shipped needle file still works",
          o[-300:])


def c_budget(a, w):
    if sanitized(a.validate):
        print("skipped: AddressSanitizer build (no address-space cap, RSS includes shadow)")
        sys.exit(77)
    path = os.path.join(w, "big.h5")
    shutil.copyfile(os.path.join(a.data, "k3-l1.h5"), path)
    with h5py.File(path, "r+") as f:
        old = f["inputs/kv_buffer"]
        attrs = dict(old.attrs)
        hk, dd = old.shape[1], old.shape[2]
        del f["inputs/kv_buffer"]
        slots = (160 << 20) // (hk * dd * 2)
        # bf16 values from a 4-letter alphabet: ~8:1 under deflate, a small
        # file declaring 160 MiB that the reader's ratio check accepts
        vals = np.array([0x3F80, 0xBF80, 0x3F00, 0xBF00], "<u2")
        data = vals[np.random.default_rng(7).integers(0, 4, (slots, hk, dd), dtype=np.uint8)]
        d = f.create_dataset("inputs/kv_buffer", data=data, chunks=(1024, hk, dd),
                             compression="gzip", compression_opts=1, shuffle=True)
        for k, v in attrs.items():
            d.attrs[k] = v
    rc, o, peak = tree_rss_peak([a.validate, "--quiet", "--backend", "reference",
                                 "--max-memory", "256M", path])
    check(rc == 2 and "budget" in o and path in o,
          "160 MiB of declared tensors under --max-memory 256M: refused (two copies + room)",
          "exit %d: %s" % (rc, o[-400:]))
    check(peak < 256, "the tree's RSS stays under the 256 MiB budget", "%.0f MiB" % peak)
    rc, o, peak = tree_rss_peak([a.validate, "--quiet", "--backend", "reference",
                                 "--max-memory", "512M", path])
    check(rc in (0, 1) and peak < 512, "the same file under --max-memory 512M is read, RSS under "
          "512 MiB", "exit %d, %.0f MiB: %s" % (rc, peak, o[-300:]))
    rc, o = run([a.validate, "--help"])
    check("budget of the whole run" in o, "--help documents the run's budget")


def c_dump_input(a, w):
    d = os.path.join(w, "d")
    os.makedirs(d)
    src = os.path.join(d, "trace-k3-sinks.h5")
    shutil.copyfile(os.path.join(a.data, "trace-k3-sinks.h5"), src)
    before = open(src, "rb").read()
    rc, o = run([a.validate, "--quiet", "--backend", "reference", "--dump", d, src])
    check(rc == 2 and "is an input of this run" in o, "--dump DIR holding the input: refused",
          "exit %d: %s" % (rc, o[-400:]))
    check(open(src, "rb").read() == before, "the input and its /expected intact")
    with h5py.File(src, "r") as f:
        check("expected" in f, "the input still has /expected")
    # another name for the same file: a hard link under the dump's name
    other = os.path.join(w, "elsewhere")
    os.makedirs(other)
    os.link(src, os.path.join(other, "x.h5"))
    os.link(src, os.path.join(d, "x.h5"))
    rc, o = run([a.validate, "--quiet", "--backend", "reference", "--dump", d,
                 os.path.join(other, "x.h5")])
    check(rc == 2 and "is an input of this run" in o and open(src, "rb").read() == before,
          "--dump onto another name of the input (hard link): refused, input intact",
          "exit %d: %s" % (rc, o[-300:]))


def c_dump_collision(a, w):
    for sub, name in (("a", "k3-l1.h5"), ("b", "k3-l2.h5")):
        os.makedirs(os.path.join(w, sub))
        shutil.copyfile(os.path.join(a.data, name), os.path.join(w, sub, "x.h5"))
    rc, o = run([a.validate, "--quiet", "--backend", "reference", "--dump",
                 os.path.join(w, "dump"), os.path.join(w, "a", "x.h5"), os.path.join(w, "b", "x.h5")])
    check(rc == 2 and "same base name" in o and not os.path.exists(os.path.join(w, "dump")),
          "two inputs with one base name and --dump: refused before anything is written",
          "exit %d: %s" % (rc, o[-300:]))


def c_symlink(a, w):
    victim = os.path.join(w, "victim.txt")
    with open(victim, "w") as f:
        f.write("precious\n")
    src = os.path.join(a.data, "k3-l1.h5")
    rep = os.path.join(w, "rep")
    os.makedirs(rep)
    os.symlink(victim, os.path.join(rep, "report.md"))
    base = [a.validate, "--quiet", "--backend", "reference"]
    rc, o = run(base + ["--report", rep, src])
    check(rc == 2 and "symbolic link" in o, "--report with report.md a planted symlink: refused",
          "exit %d: %s" % (rc, o[-300:]))
    check(not os.path.exists(os.path.join(rep, "report.json")),
          "--report: no file of the set replaced when one target is refused",
          str(os.listdir(rep)))
    for opt in ("--json", "--bias-noise", "--junit"):
        link = os.path.join(w, "link" + opt)
        os.symlink(victim, link)
        rc, o = run(base + [opt, link, src])
        check(rc == 2 and "symbolic link" in o and os.path.islink(link),
              "%s through a planted symlink: refused, the link left alone" % opt,
              "exit %d: %s" % (rc, o[-300:]))
    check(open(victim).read() == "precious\n", "the symlinks' target untouched")
    # the temporary names are not predictable: plant the old pattern, it is never used
    for n in range(os.getpid(), os.getpid() + 200):
        try:
            os.symlink(victim, os.path.join(rep, "report.json.tmp.%d" % n))
        except FileExistsError:
            pass
    os.unlink(os.path.join(rep, "report.md"))
    rc, o = run(base + ["--report", rep, src])
    check(rc == 0 and open(victim).read() == "precious\n",
          "--report with 200 symlinks planted at the old predictable temp names: written, the "
          "target untouched", "exit %d: %s" % (rc, o[-300:]))


def c_html_escape(a, w):
    name = '<img src=x onerror=alert(1)>.h5'
    path = os.path.join(w, name)
    shutil.copyfile(os.path.join(a.data, "k3-l1.h5"), path)
    with h5py.File(path, "r+") as f:
        f.attrs["case_name"] = "<script>alert('case')</script>"
        f.attrs["description"] = "<svg onload=alert(2)>"
    rep = os.path.join(w, "rep")
    rc, o = run([a.validate, "--quiet", "--backend", "reference", "--backend", "model",
                 "--report", rep, path])
    check(rc == 0, "report written", o[-300:])
    html = open(os.path.join(rep, "report.html")).read()
    for bad in ("<img", "<script", "<svg onload"):
        check(bad not in html, "report.html holds no unescaped %r" % bad)
    check("&lt;img src=x onerror=alert(1)&gt;.h5" in html, "the name is shown escaped")
    md = open(os.path.join(rep, "report.md")).read()
    check("<img" not in md, "report.md holds no unescaped markup from the name")


def c_concurrent(a, w):
    rep = os.path.join(w, "rep")
    files = [os.path.join(a.data, n) for n in ("k3-l1.h5", "k3-l2.h5", "k3-l4.h5", "dsv3-edges.h5")]
    for rnd in range(3):
        procs = [subprocess.Popen([a.validate, "--quiet", "--backend", "reference", "--report",
                                   rep, f], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True) for f in files]
        outs = [(p.wait(), p.stdout.read()) for p in procs]
        check(all(rc == 0 for rc, _ in outs), "round %d: every concurrent writer succeeded" % rnd,
              str([(rc, o[-200:]) for rc, o in outs if rc]))
        which = []
        for n in ("report.json", "report.md", "report.html"):
            text = open(os.path.join(rep, n)).read()
            which.append([os.path.basename(f) for f in files if os.path.basename(f) in text])
        check(all(len(x) == 1 for x in which) and len({x[0] for x in which}) == 1,
              "round %d: report.json, .md and .html from one run" % rnd, str(which))
    left = [n for n in os.listdir(rep) if ".tmp" in n]
    check(not left, "no temporary left", str(left))


def c_nothing_judged(a, w):
    src = os.path.join(a.data, "k3-l1.h5")
    rc, o = run([a.validate, "--backend", "captured", src])
    check(rc == 3 and "nothing was judged" in o, "every result N/A: exit 3",
          "exit %d: %s" % (rc, o[-300:]))
    rc, o = run([a.validate, "--backend", "model", os.path.join(a.data, "decline-sinks.h5")])
    check(rc == 3, "every result declined: exit 3", "exit %d" % rc)
    rc, o = run([a.validate, "--backend", "reference", src])
    check(rc == 0, "a judged run: exit 0", "exit %d" % rc)
    rc, o = run([a.validate, "--help"])
    check("3 nothing was" in o, "--help documents exit 3")


CLASSES = {"write-efbig": c_write_efbig, "needle-guarded": c_needle_guarded, "budget": c_budget,
           "dump-input": c_dump_input, "dump-collision": c_dump_collision, "symlink": c_symlink,
           "html-escape": c_html_escape, "concurrent": c_concurrent,
           "nothing-judged": c_nothing_judged}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cls", choices=sorted(CLASSES))
    for k in ("fixture", "validate", "needle", "data", "work"):
        ap.add_argument("--" + k, required=True)
    a = ap.parse_args()
    w = os.path.join(a.work, a.cls)
    shutil.rmtree(w, ignore_errors=True)
    os.makedirs(w)
    t0 = time.monotonic()
    CLASSES[a.cls](a, w)
    print("%s: %d failed check(s) in %.1f s" % (a.cls, len(FAILS), time.monotonic() - t0))
    if not FAILS:
        shutil.rmtree(w, ignore_errors=True)
    return 1 if FAILS else 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())
