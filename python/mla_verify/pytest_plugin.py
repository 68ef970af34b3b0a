"""pytest plugin of mla_verify (registered through the pytest11 entry point,
so installing the package is enough).

A test that takes an argument named `mla_case` runs once per small
catalogue case (generated in memory, each with its fixed seed) and once per
shipped fixture file, each an mla_verify.Case:

    import mla_verify as mv

    def test_my_kernel(mla_case):
        o, lse = mla_case.call_sglang(my_kernel)
        mv.assert_verify_close(mla_case, o, lse, path="fp32")

Options: --mla-family NAME (repeatable; catalogue families only),
--mla-seed N (one seed for every catalogue case), --mla-large (the large
catalogue cases too), --mla-no-fixtures / --mla-no-catalogue, --mla-trace
(the SGLang captures of the shipped trace/ directory too). For explicit
parametrization: `mla_verify.pytest_plugin.params(...)`.
"""
import os

import pytest

import mla_verify as mv


class _Ref:
    """A lazily built Case: collection stays fast, each test builds its own."""

    def __init__(self, kind, key, seed=None, family=None):
        self.kind, self.key, self.seed, self.family = kind, key, seed, family

    @property
    def id(self):
        return self.key if self.kind == "catalogue" else "file:" + os.path.basename(self.key)

    def load(self):
        if self.kind == "catalogue":
            return mv.cases(names=[self.key], small=False, seed=self.seed)[0]
        return mv.load_fixture(self.key)


def params(family=None, small=True, seed=None, catalogue=True, fixtures=True, trace=False):
    """pytest.param list over the catalogue (family, small, seed as in
    mla_verify.cases) and the shipped fixtures (trace: the SGLang captures
    too), each value a zero-argument callable returning the Case."""
    fams = None if family is None else ({family} if isinstance(family, str) else set(family))
    out = []
    if catalogue:
        for name, fam, _, large in mv.catalogue():
            if (fams is None or fam in fams) and not (small and large):
                r = _Ref("catalogue", name, seed, fam)
                out.append(pytest.param(r.load, id=r.id))
    if fixtures:
        for p in mv.shipped_fixtures(trace=trace):
            r = _Ref("file", p)
            out.append(pytest.param(r.load, id=r.id))
    return out


def pytest_addoption(parser):
    g = parser.getgroup("mla_verify")
    g.addoption("--mla-family", action="append", default=None,
                help="catalogue family for mla_case (repeatable; default: all)")
    g.addoption("--mla-seed", type=int, default=None,
                help="one seed for every catalogue case (default: each case's own)")
    g.addoption("--mla-large", action="store_true", help="the large catalogue cases too")
    g.addoption("--mla-no-catalogue", action="store_true", help="no catalogue cases")
    g.addoption("--mla-no-fixtures", action="store_true", help="no shipped fixture files")
    g.addoption("--mla-trace", action="store_true",
                help="the shipped SGLang captures (trace/) too")


def pytest_generate_tests(metafunc):
    if "mla_case" not in metafunc.fixturenames:
        return
    o = metafunc.config.getoption
    ps = params(family=o("mla_family"), small=not o("mla_large"), seed=o("mla_seed"),
                catalogue=not o("mla_no_catalogue"), fixtures=not o("mla_no_fixtures"),
                trace=o("mla_trace"))
    metafunc.parametrize("mla_case", ps, indirect=True)


@pytest.fixture
def mla_case(request):
    """An mla_verify.Case: one per catalogue case and shipped fixture."""
    return request.param()
