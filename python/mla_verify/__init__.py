"""mla_verify: judge an MLA target-verify attention kernel in-process.

    import mla_verify as mv
    case = mv.Case(q=..., k_extend=..., v_extend=..., kv_buffer=..., qo_indptr=...,
                   kv_indptr=..., kv_indices=..., sm_scale=...)
    mv.assert_verify_close(case, o, lse, path="fp32")

The judge, the fp32 reference and the catalogue are the project's C library
(libmla_verify.so, python/pyapi.c), loaded in this process with ctypes on
first use. See python/README.md; the tolerances are SPEC section 7's, one
per declared path (validate/judge.c)."""
from ._api import (Case, Verdict, assert_verify_close, cases, catalogue, families,  # noqa: F401
                   judge, load_fixture, paths, reference, shipped_fixtures)

__version__ = "0.1.0"
__all__ = ["Case", "Verdict", "judge", "assert_verify_close", "load_fixture", "cases",
           "shipped_fixtures", "reference", "paths", "catalogue", "families"]
