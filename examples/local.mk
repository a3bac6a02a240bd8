# examples/: the module an author copies, the docs of the module ABI, and a
# demonstration script.  The tests of the loader are registered in
# tests/local.mk.

# The example is built as a real dlopen module (-rpath makes libtool build a
# shared object although it is never installed), so the tests load it exactly
# as an installed one.  $(module_link_libs) resolves the xdm_* calls.
noinst_LTLIBRARIES += examples/example.la
examples_example_la_SOURCES = examples/example.c
examples_example_la_LDFLAGS = $(module_link_flags) -rpath $(abs_builddir)
examples_example_la_LIBADD = $(module_link_libs)

# Installed for authors as a starting point, with the standalone makefile
# that builds it from the installed headers only.
xdmexampledir = $(docdir)/examples
dist_xdmexample_DATA = examples/example.c examples/Makefile.example

dist_doc_DATA += doc/writing-modules.md
dist_man_MANS += man/xdm-module.7

# xdmctl on a GPU with real processes (a PyTorch server and training run,
# an xdm-bench): what the note of the xdmctl work shows.
EXTRA_DIST += examples/xdmctl_gpu_demo.sh
