# examples/: the module an author copies, the docs of the module ABI, and the
# tests of the module loader (test-only modules, check_loader, out-of-tree).

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

# ---- test-only modules: one loader failure each --------------------------
noinst_LTLIBRARIES += \
	tests/modules/bad_abi.la \
	tests/modules/small_ops.la \
	tests/modules/no_entry.la \
	tests/modules/bad_kind.la \
	tests/modules/dup.la \
	tests/modules/wrongname.la \
	tests/modules/no_alloc.la

tests_modules_bad_abi_la_SOURCES = tests/modules/bad_abi.c
tests_modules_bad_abi_la_LDFLAGS = $(module_link_flags) -rpath $(abs_builddir)
tests_modules_bad_abi_la_LIBADD = $(module_link_libs)

tests_modules_small_ops_la_SOURCES = tests/modules/small_ops.c
tests_modules_small_ops_la_LDFLAGS = $(module_link_flags) -rpath $(abs_builddir)
tests_modules_small_ops_la_LIBADD = $(module_link_libs)

tests_modules_no_entry_la_SOURCES = tests/modules/no_entry.c
tests_modules_no_entry_la_LDFLAGS = $(module_link_flags) -rpath $(abs_builddir)
tests_modules_no_entry_la_LIBADD = $(module_link_libs)

tests_modules_bad_kind_la_SOURCES = tests/modules/bad_kind.c
tests_modules_bad_kind_la_LDFLAGS = $(module_link_flags) -rpath $(abs_builddir)
tests_modules_bad_kind_la_LIBADD = $(module_link_libs)

tests_modules_dup_la_SOURCES = tests/modules/dup.c
tests_modules_dup_la_LDFLAGS = $(module_link_flags) -rpath $(abs_builddir)
tests_modules_dup_la_LIBADD = $(module_link_libs)

tests_modules_wrongname_la_SOURCES = tests/modules/wrongname.c
tests_modules_wrongname_la_LDFLAGS = $(module_link_flags) -rpath $(abs_builddir)
tests_modules_wrongname_la_LIBADD = $(module_link_libs)

tests_modules_no_alloc_la_SOURCES = tests/modules/no_alloc.c
tests_modules_no_alloc_la_LDFLAGS = $(module_link_flags) -rpath $(abs_builddir)
tests_modules_no_alloc_la_LIBADD = $(module_link_libs)

# ---- the loader's suite --------------------------------------------------
check_PROGRAMS += tests/check_loader
TESTS += tests/check_loader
tests_check_loader_SOURCES = tests/check_loader.c
tests_check_loader_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_loader_LDADD = libxdm.la $(CHECK_LIBS)

# ---- out of tree, against the installed xdm ------------------------------
# Builds examples/example.c with nothing but the installed headers and
# pkg-config, and runs it under the installed xdm-bench.  77 (nothing to run
# it with) is reported as a skip: make itself knows no exit code 77.
EXTRA_DIST += tests/out-of-tree.sh
installcheck-local:
	@PKG_CONFIG='$(PKG_CONFIG)' CC='$(CC)' MAKE='$(MAKE)' \
	  $(SHELL) '$(srcdir)/tests/out-of-tree.sh' '$(DESTDIR)$(prefix)' '$(srcdir)'; \
	rc=$$?; \
	if test $$rc -eq 77; then \
	  echo "SKIP: tests/out-of-tree.sh (see above)"; \
	elif test $$rc -ne 0; then \
	  echo "FAIL: tests/out-of-tree.sh"; exit $$rc; \
	else \
	  echo "PASS: tests/out-of-tree.sh"; \
	fi

# xdmctl on a GPU with real processes (a PyTorch server and training run,
# an xdm-bench): what the note of the xdmctl work shows.
EXTRA_DIST += examples/xdmctl_gpu_demo.sh
