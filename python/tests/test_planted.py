"""A planted-bug kernel is caught through assert_verify_close, and the
README's quickstart test (python/examples/test_quickstart.py, run as it is)
passes on the numpy stand-in and fails on its planted-bug variant."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import mla_verify as mv
from mla_verify.capture import standin

HERE = os.path.dirname(os.path.abspath(__file__))
QUICKSTART = os.path.join(os.path.dirname(HERE), "examples", "test_quickstart.py")
sys.path.insert(0, HERE)
import planted_bug  # noqa: E402  (patches standin on import; undone below)

standin.extend_attention_fwd = planted_bug._correct


def test_planted_bug_caught():
    """A dropped KV token FAILs on every case with a prefix; the correct
    stand-in PASSes the same cases on the strictest path."""
    for case in mv.cases(family=["k3-tp8", "needle", "dsv3-tp8"]):
        o, lse = case.call_sglang(planted_bug._correct)
        mv.assert_verify_close(case, o, lse, path="fp32")
        o, lse = case.call_sglang(planted_bug.dropped_last_token)
        if case.slots.size == 0:
            continue
        with pytest.raises(AssertionError) as e:
            mv.assert_verify_close(case, o, lse, path="auto")
        v = e.value.verdict
        assert v.status == "FAIL" and v.reason and str(v) in str(e.value)
        assert str(v).startswith("FAIL %s [path auto" % case.name)


def _plugin_args():
    """-p mla_verify.pytest_plugin unless the installed package registers it
    (the pytest11 entry point)."""
    from importlib.metadata import entry_points
    eps = entry_points()
    group = eps.select(group="pytest11") if hasattr(eps, "select") else eps.get("pytest11", [])
    return [] if any(e.name == "mla_verify" for e in group) else ["-p", "mla_verify.pytest_plugin"]


def _pytest(*args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [HERE] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
                       + _plugin_args() + [QUICKSTART] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                       cwd=HERE)
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped)", p.stdout)}
    return p.returncode, counts, p.stdout


def test_quickstart_passes_on_the_standin():
    rc, n, out = _pytest()
    assert rc == 0 and n.get("failed", 0) == 0, out[-3000:]
    # Every small catalogue case and every synthetic shipped file; the one
    # without output elements (decline-empty-batch) is skipped as N/A.
    assert n["passed"] >= 45 and n.get("skipped", 0) <= 2, out[-3000:]


def test_quickstart_fails_on_the_planted_bug():
    rc, n, out = _pytest("-p", "planted_bug", "--mla-no-fixtures")
    assert rc == 1, out[-3000:]
    with_prefix = sum(c.slots.size > 0 for c in mv.cases())
    assert n["failed"] == with_prefix, out[-3000:]
