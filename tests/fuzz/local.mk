# tests/fuzz: one libFuzzer target per parser that takes text from outside
# (configure --enable-fuzzing, with CC=clang).  tests/fuzz/run.sh builds and
# runs them over their seed corpora in tests/fuzz/corpus/<target>/;
# DESIGN-NOTES.md ("Fuzzing") says how to run them for long.
fuzz_targets = \
	tests/fuzz/fuzz_config \
	tests/fuzz/fuzz_stack \
	tests/fuzz/fuzz_size \
	tests/fuzz/fuzz_tree_store \
	tests/fuzz/fuzz_log_replay \
	tests/fuzz/fuzz_logcsv

# The sources are distributed whether or not this build fuzzes; so are the
# corpora and dictionaries (a directory in EXTRA_DIST is copied whole) and
# the runner.
EXTRA_DIST += tests/fuzz/run.sh tests/fuzz/corpus tests/fuzz/dict
noinst_HEADERS += tests/fuzz/fuzz.h tests/fuzz/conf_text.h

if FUZZING
noinst_PROGRAMS = $(fuzz_targets)
endif

# The parser targets reach internal functions, so they link the core's
# convenience library (as check_config does); libxdm exports xdm_ only.
fuzz_link_flags = $(AM_LDFLAGS) $(FUZZ_LDFLAGS)

tests_fuzz_fuzz_config_SOURCES = tests/fuzz/fuzz_config.c
tests_fuzz_fuzz_config_LDFLAGS = $(fuzz_link_flags)
tests_fuzz_fuzz_config_LDADD = core/libxdmcore.la

tests_fuzz_fuzz_stack_SOURCES = tests/fuzz/fuzz_stack.c
tests_fuzz_fuzz_stack_LDFLAGS = $(fuzz_link_flags)
tests_fuzz_fuzz_stack_LDADD = core/libxdmcore.la

tests_fuzz_fuzz_size_SOURCES = tests/fuzz/fuzz_size.c
tests_fuzz_fuzz_size_LDFLAGS = $(fuzz_link_flags)
tests_fuzz_fuzz_size_LDADD = core/libxdmcore.la

# The knob stores go through a real runtime whose modules are dlopen'ed and
# call back into libxdm: the target must use that same libxdm, not a copy
# of the core of its own.  It finds this tree's modules and the test config
# by itself, so that it runs by hand as well as from run.sh.
tests_fuzz_fuzz_tree_store_SOURCES = tests/fuzz/fuzz_tree_store.c
tests_fuzz_fuzz_tree_store_CPPFLAGS = $(AM_CPPFLAGS) \
	-DXDM_FUZZ_MODULE_PATH='"$(build_module_path)"' \
	-DXDM_FUZZ_CONFIG='"$(abs_top_srcdir)/tests/data/host.conf"'
tests_fuzz_fuzz_tree_store_LDFLAGS = $(fuzz_link_flags) -no-install
tests_fuzz_fuzz_tree_store_LDADD = libxdm.la

tests_fuzz_fuzz_log_replay_SOURCES = tests/fuzz/fuzz_log_replay.c tests/log_replay.c \
	tests/log_replay.h
tests_fuzz_fuzz_log_replay_LDFLAGS = $(fuzz_link_flags)

# The programs' reader of the same log (tools/common/logcsv.c), linked as
# xdm-bench and xdmctl link it.
tests_fuzz_fuzz_logcsv_SOURCES = tests/fuzz/fuzz_logcsv.c
tests_fuzz_fuzz_logcsv_LDADD = tools/common/libxdmtools.la
tests_fuzz_fuzz_logcsv_LDFLAGS = $(fuzz_link_flags)

# What run.sh needs built: the targets and the modules fuzz_tree_store loads.
fuzz_modules = backends/host.la backends/pool.la adaptors/budget.la \
	adaptors/logging.la examples/example.la
.PHONY: fuzz-build
fuzz-build:
	@test -n '$(FUZZ_LDFLAGS)' || \
	  { echo 'fuzz-build: configure this tree with CC=clang --enable-fuzzing' >&2; exit 1; }
	$(MAKE) $(AM_MAKEFLAGS) $(fuzz_modules) $(fuzz_targets)
