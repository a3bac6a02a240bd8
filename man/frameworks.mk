# man/frameworks.mk: the pages of the Python package, its framework switches
# and its pytest plugin, and of the torch tools.
dist_man_MANS += man/xdm-python.7 man/xdm-torch.7 man/xdm-cupy.7 man/xdm-numba.7
dist_man_MANS += man/xdm-pytest.7
dist_man_MANS += man/xdm-torch-bench.1 man/xdm-torch-replay.1
