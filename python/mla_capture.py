"""`import mla_capture` as before the capture module moved into the
mla_verify package: the same module object as mla_verify.capture."""
import sys

from mla_verify import capture as _capture

sys.modules[__name__] = _capture
