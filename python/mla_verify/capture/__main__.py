"""python3 -m mla_verify.capture ...: capture SGLang's production
target-verify kernels as trace fixtures (mla_verify.capture.sglang; run with
--help)."""
import sys

from mla_verify.capture.sglang import main

sys.exit(main())
