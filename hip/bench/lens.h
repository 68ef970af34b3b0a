// mla-bench's --lens lists: per-sequence prefixes in flashmla_bench's LENS
// syntax (SPEC section 8a). Included once, by mla_bench.hip.
#pragma once

// Limits of a --lens list: kv_indptr is int32 (the API's), so the batch's
// total prefix must fit; a sequence and a batch far beyond any serving batch
// are typing errors, reported rather than allocated.
#define LENS_MAX_PREFIX (1 << 24)
#define LENS_MAX_SEQS 65536

// Parses LIST = item[,item...], item = N or NxM (M sequences of prefix N),
// the syntax of flashmla_bench's LENS (SPEC section 8a). Digits only: no
// signs, spaces or empty items. Returns false with a message naming the
// offending item.
static bool parse_lens(const char *list, std::vector<int> &lens, std::string &why)
{
    lens.clear();
    long long total = 0;
    const char *p = list;
    if (!*p) {
        why = "empty list";
        return false;
    }
    for (;;) {
        const char *item = p;
        long long v[2] = {0, 1};
        for (int k = 0; k < 2; ++k) {
            const char *d = p;
            long long x = 0;
            while (*p >= '0' && *p <= '9' && x <= 1LL << 40)
                x = x * 10 + (*p++ - '0');
            if (p == d) {
                const char *end = strchr(item, ',');
                why = "item '" + (end ? std::string(item, end - item) : std::string(item)) +
                      "' is not N or NxM with N, M decimal integers";
                return false;
            }
            v[k] = x;
            if (k == 0 && *p == 'x')
                ++p;
            else
                break;
        }
        const std::string it = std::string(item, p - item);
        if (*p && *p != ',') {
            why = "unexpected '" + std::string(1, *p) + "' after item '" + it + "'";
            return false;
        }
        if (v[0] > LENS_MAX_PREFIX) {
            why = "item '" + it + "': prefix over " + std::to_string(LENS_MAX_PREFIX) + " tokens";
            return false;
        }
        if (v[1] < 1 || v[1] > LENS_MAX_SEQS || (long long)lens.size() + v[1] > LENS_MAX_SEQS) {
            why = "item '" + it + "': the batch must have 1.." + std::to_string(LENS_MAX_SEQS) + " sequences";
            return false;
        }
        total += v[0] * v[1];
        if (total > 2147483647LL) {
            why = "item '" + it + "': the batch's total prefix exceeds the int32 kv_indptr";
            return false;
        }
        lens.insert(lens.end(), (size_t)v[1], (int)v[0]);
        if (!*p)
            return true;
        ++p;
    }
}

