"""The CPU-sample attribution of ``tools.diagnostics.step_perf_profile`` on hand-written ``perf script -F ip,sym`` text."""

from tools.diagnostics.step_perf_profile import CATEGORIES, Profile, attribute, parse_perf_script, render

INVOKE = "5a10 tflite::Subgraph::Invoke"
IF = "5b20 tflite::ops::builtin::if_kernel::Eval"
XNN = "5c30 tflite::xnnpack::(anonymous namespace)::SubgraphInvoke"
PERF_SCRIPT = f"""
	1000 __memcpy_avx_unaligned_erms
	2000 tflite::ops::builtin::read_variable::Eval
	{INVOKE}
	{IF}
	{INVOKE}

	1100 __memcpy_avx_unaligned_erms
	2100 tflite::resource::ResourceVariable::AssignFrom
	2200 tflite::ops::builtin::assign_variable::Eval
	{INVOKE}
	{IF}
	{INVOKE}

	1200 __memmove_avx_unaligned_erms
	1210 pthreadpool_parallelize_1d_tile_1d_dynamic
	1220 xnn_run_operator_with_index
	{XNN}
	{INVOKE}

	1300 xnn_f32_gemm_minmax_ukernel_6x16__asm_amd64_fma3_broadcast
	{XNN}
	{INVOKE}

	1400 xnn_f32_gemm_minmax_ukernel_6x16__asm_amd64_fma3_broadcast
	{XNN}
	{INVOKE}
	{IF}
	{INVOKE}

	1500 tflite::optimized_ops::DepthwiseConv<float, float>
	2500 tflite::ops::builtin::depthwise_conv::Eval
	{INVOKE}

	1600 xnn_f32_vsub_ukernel__avx_u16
	{XNN}
	{INVOKE}
	{IF}
	{INVOKE}

	1700 xnn_x32_packw_gemm_gio_ukernel_x16__scalar
	{XNN}
	{INVOKE}

	1800 tflite::ops::builtin::DeepOrShallowCopyTensorsShapeTypeData
	{IF}
	{INVOKE}

	1850 __memcpy_avx_unaligned_erms (inlined)
	1860 tflite::Subgraph::InvokeImpl
	{INVOKE}
	{IF}
	{INVOKE}

	1900 _PyEval_EvalFrameDefault
	1910 [unknown]
"""


def test_parse_perf_script():
    stacks = parse_perf_script(PERF_SCRIPT.splitlines())
    assert len(stacks) == 11
    assert stacks[0][:2] == ("__memcpy_avx_unaligned_erms", "tflite::ops::builtin::read_variable::Eval")
    assert stacks[-1] == ("_PyEval_EvalFrameDefault", "[unknown]")
    assert parse_perf_script(["", "  ", "1 a", "2"]) == [("a", "[unknown]")]


def test_attribute_by_hand():
    profile = attribute(parse_perf_script(PERF_SCRIPT.splitlines()))
    assert profile.samples == 11 and profile.invoke == 10  # the Python frame is outside the interpreter
    s = profile.shares
    assert s["copy: variable reads (READ_VARIABLE)"] == (1, 0)
    assert s["copy: variable writes (ASSIGN_VARIABLE)"] == (1, 0)
    assert s["copy: inside XNNPACK (reshape and copy nodes)"] == (0, 1)
    assert s["matmul and convolution (GEMM)"] == (1, 1)  # one in an IF branch, one in the signature's graph
    assert s["depthwise convolution"] == (0, 1)  # DepthwiseConv<...> is not counted as a dense conv
    assert s["elementwise and reductions"] == (1, 0)
    assert s["weight packing at every call (XNNPACK)"] == (0, 1)
    assert s["IF kernel: branch set-up"] == (1, 0)
    assert s["copy: an op kernel whose frame was not unwound (inlined memcpy)"] == (1, 0)
    assert s["other"] == (0, 0)
    assert set(s) == {label for label, _ in CATEGORIES}


def test_render_by_hand():
    profile = Profile(10, 8, {"matmul and convolution (GEMM)": (2, 4), "other": (0, 2), "depthwise convolution": (0, 0)})
    text = render("m.tflite", {"infer": profile}, {"infer": 4.0}, command="python -m tools.diagnostics.step_perf_profile")
    assert "## infer: 4.00 ms per call" in text and "8 of 10 samples" in text
    # 6 of 8 samples = 75 %, 3.00 of 4 ms; 2 of 8 in IF branches = 25 %
    assert "| matmul and convolution (GEMM) | 75.0 % | 25.0 % | 50.0 % | 3.00 |" in text
    assert "| other | 25.0 % | 0.0 % | 25.0 % | 1.00 |" in text
    assert "depthwise convolution" not in text  # no samples: no row
    assert text.index("matmul") < text.index("| other")
