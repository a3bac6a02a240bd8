# tools/torch: the PyTorch programs, Python scripts that need torch and a
# GPU.  xdm-torch-bench measures torch's allocators against xdm's stacks;
# xdm-torch-replay replays a logging CSV through torch's own allocator,
# beside xdm-bench --replay.
dist_bin_SCRIPTS += tools/torch/xdm-torch-bench tools/torch/xdm-torch-replay
