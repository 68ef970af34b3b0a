"""In-process verdicts equal mla-validate's (issue 40, point 6): on every
shipped fixture and every small catalogue case, the same output judged on
the same path gets the same status, the same reason and the same worst row.

mla-validate (MLA_VALIDATE, set by the ctest python.pytest) judges the
files' captured outputs (path auto) and the CPU model's outputs (path
bf16-partials), dumping the model's; the package judges the same outputs
from the files and from its in-memory catalogue."""
import json
import os
import subprocess

import numpy as np
import pytest

import mla_verify as mv

MLA_VALIDATE = os.environ.get("MLA_VALIDATE")
pytestmark = pytest.mark.skipif(not MLA_VALIDATE or not os.path.exists(MLA_VALIDATE),
                                reason="MLA_VALIDATE (the mla-validate binary) not given")
SEED = 20240  # the catalogue run's base seed: any


def _run(tmp, args):
    rep = os.path.join(tmp, "report")
    p = subprocess.run([MLA_VALIDATE, "--quiet", "--report", rep] + args,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert p.returncode in (0, 1), p.stdout[-3000:]
    with open(os.path.join(rep, "report.json")) as f:
        return json.load(f)["results"]


def _g6(x):
    return float("%.6g" % x)


def _same(cli, v):
    """The fields of mla-validate's JSON row equal the in-process verdict's
    (numbers as the JSON writer prints them, %.6g)."""
    got = {"verdict": v.status, "reason": v.reason,
           "worst_row_cos": _g6(v.metrics["worst_row_cos"]),
           "worst_ratio": _g6(v.metrics["worst_ratio"]),
           "bias_group": v.metrics["bias_group"], "cos_limit": _g6(v.tolerances["cos_limit"])}
    want = {k: cli[k] for k in got}
    assert got == want, "%s %s" % (cli["fixture"], cli["backend"])


@pytest.fixture(scope="module")
def captured_run(tmp_path_factory):
    """Every shipped file, backend captured (N/A where there is no /expected)."""
    return _run(str(tmp_path_factory.mktemp("captured")),
                ["--backend", "captured"] + mv.shipped_fixtures())


@pytest.fixture(scope="module")
def model_run(tmp_path_factory):
    """The synthetic shipped files (those without /expected), backend model,
    outputs dumped. The SGLang captures are judged as captured above."""
    tmp = str(tmp_path_factory.mktemp("model"))
    dump = os.path.join(tmp, "dump")
    return _run(tmp, ["--backend", "model", "--dump", dump]
                + mv.shipped_fixtures(trace=False)), dump


@pytest.fixture(scope="module")
def catalogue_run(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("catalogue"))
    dump = os.path.join(tmp, "dump")
    res = _run(tmp, ["--catalogue", "--small", "--seed", str(SEED), "--backend", "model",
                     "--dump", dump])
    return res, dump


def test_shipped_fixtures_captured(captured_run):
    """Every shipped file with /expected: its captured output, path auto."""
    rows = {r["fixture"]: r for r in captured_run}
    files = {os.path.basename(p): p for p in mv.shipped_fixtures()}
    assert set(rows) == set(files)
    judged = 0
    for name, row in sorted(rows.items()):
        case = mv.load_fixture(files[name])
        if case.expected_o is None:
            assert row["verdict"] == "N/A", name
            continue
        _same(row, mv.judge(case, case.expected_o, case.expected_lse, path="auto"))
        judged += 1
    assert judged >= 40  # the SGLang captures and trace-k3-sinks
    # Both verdicts occur: the known-bad SGLang outputs fail here as there.
    assert {"PASS", "FAIL"} <= {r["verdict"] for r in rows.values()}


def test_shipped_fixtures_model(model_run):
    """The synthetic shipped files: the CPU model's outputs (dumped), path
    bf16-partials."""
    res, dump = model_run
    n = 0
    for row in res:
        if row["verdict"] in ("DECLINED", "N/A"):
            continue
        case = mv.load_fixture(os.path.join(dump, row["fixture"]))
        _same(row, mv.judge(case, case.expected_o, case.expected_lse, path="bf16-partials"))
        n += 1
    assert n >= 15  # every synthetic file the model does not decline


def test_catalogue(catalogue_run):
    """Every small catalogue case, generated in memory by the package with
    the seed mla-validate used for it (--seed N gives case i the seed
    N + 7919 i; the dump stores it): the inputs equal mla-validate's, and
    so do the verdicts on the model's outputs."""
    res, dump = catalogue_run
    rows = {r["case"]: r for r in res}
    assert set(rows) == {c[0] for c in mv.catalogue() if not c[3]}
    n = 0
    for name, row in sorted(rows.items()):
        if row["verdict"] in ("DECLINED", "N/A"):
            continue
        f = mv.load_fixture(os.path.join(dump, row["fixture"] + ".h5"))
        case, = mv.cases(names=[name], seed=f.seed)
        for a in ("q", "k_extend", "v_extend", "kv_buffer", "qo_indptr", "kv_indptr", "slots"):
            assert np.array_equal(getattr(f, a), getattr(case, a)), (name, a)
        _same(row, mv.judge(case, f.expected_o, f.expected_lse, path="bf16-partials"))
        n += 1
    assert n >= 15
