import mla_verify as mv
from mla_verify.capture.standin import extend_attention_fwd as my_kernel  # your kernel here


def test_my_kernel(mla_case):  # runs once per catalogue case and shipped fixture
    o, lse = mla_case.call_sglang(my_kernel)  # SGLang's extend_attention_fwd arguments
    mv.assert_verify_close(mla_case, o, lse, path="fp32")
