"""A pytest plugin (-p planted_bug) that plants a bug in the numpy stand-in
before any test module imports it: the last prefix token of every sequence
is dropped, the bug the peers' own tests miss at a 4k prefix (issue 40).
The quickstart test (python/examples/test_quickstart.py), run unchanged
under this plugin, must fail."""
import numpy as np

from mla_verify.capture import standin

_correct = standin.extend_attention_fwd


def dropped_last_token(q_extend, k_extend, v_extend, o_extend, k_buffer, v_buffer, qo_indptr,
                       kv_indptr, kv_indices, *args, **kwargs):
    kvp = np.asarray(kv_indptr, dtype=np.int64)
    kvi = np.asarray(kv_indices, dtype=np.int64)
    keep = np.ones(kvi.size, dtype=bool)
    for b in range(kvp.size - 1):
        if kvp[b + 1] > kvp[b]:
            keep[kvp[b + 1] - 1] = False
    short = np.concatenate([[0], np.cumsum(np.maximum(np.diff(kvp) - 1, 0))])
    return _correct(q_extend, k_extend, v_extend, o_extend, k_buffer, v_buffer, qo_indptr,
                    short, kvi[:kvp[-1]][keep[:kvp[-1]]], *args, **kwargs)


standin.extend_attention_fwd = dropped_last_token
