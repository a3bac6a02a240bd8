# tests/gpu: the framework tests on a GPU (pytest), run through
# tests/gpu_python.sh, which skips (77) where python3 has no torch with CUDA.
TESTS += tests/gpu_python.sh
EXTRA_DIST += tests/gpu_python.sh \
	tests/gpu/conftest.py \
	tests/gpu/test_torch.py \
	tests/gpu/test_shared_budget.py \
	tests/gpu/test_cupy_numba.py
