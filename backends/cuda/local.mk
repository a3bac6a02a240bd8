# backends/cuda: the cuda module (platform, cuda_direct, cuda_async); see issue 3
