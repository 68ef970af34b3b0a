#!/bin/bash
# mla-bench's --lens list (issue 43), checked without a GPU: --list-cases
# prints the cases a list makes and exits before touching the device, and a
# bad list exits 2 naming the bad item, also before the device.
#   bash hip/bench/tests/test_lens_cli.sh BUILD/hip/mla-bench
set -u
bench=${1:?usage: test_lens_cli.sh MLA_BENCH}
fail=0
check() { # what expected got
    if [ "$2" != "$3" ]; then echo "FAIL: $1: expected '$2', got '$3'"; fail=1; else echo "ok: $1"; fi
}

# 65536,1024x31: bs 32, 97280 prefix tokens, mean 3040. K3 (H 12, L 8):
# bytes (97280 + 32*8) * 576 * 2 = 112361472; flop
# 2 * 12 * 8 * (97280 + 32*8) * (576 + 512) = 2.03749e+10 (%.6g).
out=$("$bench" --lens 65536,1024x31 --list-cases 2>&1); rc=$?
check "good list exit" 0 "$rc"
check "one case per shape (default K3 and DSV3)" 2 "$(grep -c '^H ' <<<"$out")"
check "K3 case" "H 12 L 8 bs 32 prefix mean 3040 min 1024 max 65536 kv_tokens 97280 kv_bytes 112361472 flop 2.03749e+10 lens 65536,1024x31" \
    "$(grep '^H 12 ' <<<"$out")"
check "DSV3 flop over its own H, L" "flop 1.35654e+10" "$(grep -o 'flop [^ ]*' <<<"$(grep '^H 16 ' <<<"$out")")"

# Two lists at one shape; a mean that is not an integer (1000 + 1001 + 1001).
out=$("$bench" --lens 1000,1001x2 --lens 131072,4096x63 --only 16,4 --list-cases 2>&1)
check "two lists at --only 16,4" "H 16 L 4 bs 3 prefix mean 1000.666667 min 1000 max 1001 kv_tokens 3002|H 16 L 4 bs 64 prefix mean 6080 min 4096 max 131072 kv_tokens 389120" \
    "$(grep -o '^H .* kv_tokens [0-9]*' <<<"$out" | paste -sd'|')"

for bad in "" "1024x" "x3" "1024,,5" "1024," "1 024" "-5" "1024X3" "1024x0" "16777217" "1024x65537" "2000000x2000" "3e4"; do
    err=$("$bench" --lens "$bad" --list-cases 2>&1 >/dev/null); rc=$?
    check "bad list '$bad' exit" 2 "$rc"
    grep -q "bad --lens '$bad'" <<<"$err" || { echo "FAIL: no message naming '$bad': $err"; fail=1; }
done
"$bench" --lens 1024 --only 12 --list-cases > /dev/null 2>&1
check "--only with one number" 2 "$?"
"$bench" --only 12,8 --list-cases > /dev/null 2>&1
check "--only H,L without --lens" 2 "$?"
"$bench" --lens 1024 --cases 12,8,1,1024 --list-cases > /dev/null 2>&1
check "--lens with --cases" 2 "$?"
"$bench" --lens-typo 1024 > /dev/null 2>&1
check "unknown argument" 2 "$?"
exit $fail
