"""Page tables -> slot lists, shared by Case and capture.

A paged call (page_size P > 1) keeps kv_indptr in tokens (the prefix
lengths, as with P = 1) and gives kv_indices as a page table: flat, each
sequence's ceil(prefix / P) pages in a row, or one row per sequence
([num_seqs, max_pages], FlashMLA's block table). Token t of sequence b lives
in pool slot page * P + t % P, page = its table's entry t // P: the slot
list of page size 1 that every fixture and the C library take."""
import numpy as np


def expand_pages(table, kv_indptr, page_size, num_pages):
    """(slot list int64 [kv_indptr[-1]]). Raises ValueError naming
    kv_indices when the table is short, of the wrong shape or points
    outside num_pages."""
    P = int(page_size)
    kvi = np.asarray(table).astype(np.int64)
    lens = np.diff(np.asarray(kv_indptr, dtype=np.int64))
    pages = (lens + P - 1) // P
    most = int(pages.max()) if pages.size else 0
    if kvi.ndim == 2:
        if kvi.shape[0] != lens.size or kvi.shape[1] < most:
            raise ValueError("kv_indices: block table shape %s, expected [%d, >= %d]"
                             % (kvi.shape, lens.size, most))
        rows = [kvi[b, :pages[b]] for b in range(lens.size)]
    elif kvi.ndim == 1:
        need = int(pages.sum())
        if kvi.size < need:
            raise ValueError("kv_indices: %d pages, the prefixes need %d pages of %d tokens"
                             % (kvi.size, need, P))
        starts = np.concatenate([[0], np.cumsum(pages)])
        rows = [kvi[starts[b]:starts[b + 1]] for b in range(lens.size)]
    else:
        raise ValueError("kv_indices: %d dimensions; a page table is 1-D or [num_seqs, "
                         "max_pages]" % kvi.ndim)
    flat = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    if flat.size and (flat.min() < 0 or flat.max() >= num_pages):
        bad = flat[(flat < 0) | (flat >= num_pages)][0]
        raise ValueError("kv_indices: page %d outside the pool's %d pages" % (bad, num_pages))
    if not rows:
        return np.zeros(0, np.int64)
    return np.concatenate([r[np.arange(n) // P] * P + np.arange(n) % P
                           for r, n in zip(rows, lens)]).astype(np.int64)
