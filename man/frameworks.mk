# man/frameworks.mk: the pages of the Python package and its framework switches.
dist_man_MANS += man/xdm-python.7 man/xdm-torch.7 man/xdm-cupy.7 man/xdm-numba.7
