# tests/cuda: the GPU suites; see issue 3
