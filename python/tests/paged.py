"""Test helper: a case's prefix moved into pages of a new pool."""
import numpy as np


def paged_pool(case, P, rng, table_2d=False, spare=3):
    """(pool [pages, P, kv_heads, head_dim], page table) holding case's
    prefix in shuffled pages of P tokens, `spare` pages nobody references
    (NaN); the table flat or [num_seqs, max_pages] (padded with -1)."""
    lens = np.diff(case.kv_indptr)
    npages = (lens + P - 1) // P
    order = rng.permutation(int(npages.sum()) + spare)
    pool = np.full((order.size, P) + case.kv_buffer.shape[1:], 0x7FC0, case.kv_buffer.dtype)
    tables, k = [], 0
    for b, n in enumerate(lens):
        pages = order[k:k + npages[b]]
        k += npages[b]
        t = np.arange(n)
        pool[pages[t // P], t % P] = case.kv_buffer[case.slots[case.kv_indptr[b] + t]]
        tables.append(pages)
    if not table_2d:
        return pool, np.concatenate(tables)
    kvi = np.full((lens.size, int(npages.max()) + 2), -1, np.int64)
    for b, pg in enumerate(tables):
        kvi[b, :pg.size] = pg
    return pool, kvi
