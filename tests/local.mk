# tests/local.mk: every test of the tree is registered here, and only here.
# tests/README says the layout; in short, a folder says what a test tests:
#
#   tests/unit/         one process, one part of the tree
#   tests/conformance/  the allocator contract, once, over every stack
#   tests/process/      several processes: the budget, users, the FUSE mount
#   tests/tools/        the programs of tools/ (xdm-bench, xdmctl)
#   tests/python/       the Python package on the host platform
#   tests/gpu/          a GPU (each skips, 77, on a machine without one)
#   tests/fuzz/         the libFuzzer targets (not run by make check)
#   tests/modules/      modules the loader's tests load, one failure each
#   tests/lib/          the helpers the suites share
#
# A check_* program is a `check` suite; a *.sh file is a script test; a
# test_*.py file is a pytest module, run by its folder's script.

# Tests find the modules of this build tree, never installed ones, and use a
# known config rather than whatever the machine has in $(sysconfdir).  The
# Python tests need the configured interpreter and compiler (whose
# sanitizer runtime they may preload).
# The suite's budgets are in /dev/shm whatever the machine has installed:
# where the shared budget directory exists (xdm-budget(7), OTHER USERS),
# root and users outside its group would be refused there by default.
# check_tenants tests the default itself, without this.
AM_TESTS_ENVIRONMENT = \
	XDM_MODULE_PATH='$(build_module_path):$(abs_top_builddir)/tests/modules/.libs'; \
	export XDM_MODULE_PATH; \
	XDM_CONFIG='$(abs_top_srcdir)/tests/data/host.conf'; export XDM_CONFIG; \
	XDM_TOP_SRCDIR='$(abs_top_srcdir)'; export XDM_TOP_SRCDIR; \
	XDM_TOP_BUILDDIR='$(abs_top_builddir)'; export XDM_TOP_BUILDDIR; \
	PYTHON='$(PYTHON)'; export PYTHON; CC='$(CC)'; export CC; \
	CK_DEFAULT_TIMEOUT=300; export CK_DEFAULT_TIMEOUT; \
	XDM_BUDGET_DIR=/dev/shm; export XDM_BUDGET_DIR; \
	LSAN_OPTIONS="suppressions=$(abs_top_srcdir)/tests/lsan.supp$${LSAN_OPTIONS:+:$$LSAN_OPTIONS}"; \
	export LSAN_OPTIONS; \
	TSAN_OPTIONS="suppressions=$(abs_top_srcdir)/tests/tsan.supp:halt_on_error=1:second_deadlock_stack=1$${TSAN_OPTIONS:+:$$TSAN_OPTIONS}"; \
	export TSAN_OPTIONS;

# A suite is tests/<folder>/check_<name>.c, linked with libxdm and check,
# unless its lines below say otherwise.  (The default LDADD serves every
# program without one of its own; the installed programs all have theirs.)
LDADD = libxdm.la $(CHECK_LIBS)
AM_CPPFLAGS += $(CHECK_CFLAGS)
# -no-install: a real executable in the build tree, not a libtool wrapper
# script, for a test that execs it, signals it by pid or runs it under a
# sanitizer.
test_exec_flags = $(AM_LDFLAGS) -no-install

noinst_HEADERS += tests/lib/testutil.h tests/lib/thread_churn.h tests/lib/random_churn.h \
	tests/lib/budget_test.h tests/lib/budget_util.h tests/lib/budget_agent.h \
	tests/lib/cudatest.h tests/lib/cudacheck.h tests/lib/ipc_peers.h tests/lib/ipc_raw.h
EXTRA_DIST += tests/README tests/data/host.conf tests/lsan.supp tests/tsan.supp
# Not run by make check: make check itself, repeatedly, under stress-ng.
EXTRA_DIST += tests/under-load.sh
# By hand on a GPU: what the driver does with per-thread streams (nvcc), and
# which CuPy or Numba feature hangs or fails under xdm (python3).
EXTRA_DIST += tests/gpu/probes/ptds_order.cu tests/gpu/probes/ptds_exit.cu \
	tests/gpu/probes/cupy_probe.py
# The CI job (README.md) and what it checks beside make check.
EXTRA_DIST += tests/ci.sh tests/install-deps.sh tests/dist-complete.sh
# The Debian packages built from the tarball, linted, installed and purged.
EXTRA_DIST += tests/deb/packages.sh

# ---- unit: one process, one part ------------------------------------------
unit_tests = \
	tests/unit/check_errors \
	tests/unit/check_runtime \
	tests/unit/check_tracking \
	tests/unit/check_capture_host \
	tests/unit/check_tree \
	tests/unit/check_devices \
	tests/unit/check_native \
	tests/unit/check_rmw \
	tests/unit/check_config \
	tests/unit/check_ipc_handle \
	tests/unit/check_loader \
	tests/unit/check_host_platform \
	tests/unit/check_host_vmm \
	tests/unit/check_pool \
	tests/unit/check_pool_tcache \
	tests/unit/check_pool_vmm \
	tests/unit/check_chunks \
	tests/unit/check_peers \
	tests/unit/check_logging \
	tests/unit/check_guard
check_PROGRAMS += $(unit_tests)
TESTS += $(unit_tests)

tests_unit_check_tree_LDADD = $(LDADD) -lrt
# check_rmw counts the atomic read-modify-writes of one pair by
# single-stepping a child with ptrace (doc/hot-path.md); x86-64 only.
# check_config calls the parser's internal functions, so it links the
# core's convenience library rather than libxdm, which exports xdm_ only.
tests_unit_check_config_CPPFLAGS = $(AM_CPPFLAGS) -DXDM_TEST_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_check_config_LDADD = core/libxdmcore.la $(CHECK_LIBS)
# check_ipc_handle drives the handle's encoder and decoder, internal too.
tests_unit_check_ipc_handle_LDADD = core/libxdmcore.la $(CHECK_LIBS)
# The host platform's queues and events are plain C over their own structs:
# linked straight in and driven with real threads, beside host.so's tables.
tests_unit_check_host_platform_SOURCES = tests/unit/check_host_platform.c \
	backends/host/stream.h backends/host/queue.h backends/host/stream.c \
	backends/host/event.c backends/host/copy.c
# The core's capture rules over the host platform's simulated captures: the
# platform's files linked in and registered under a name of their own, so
# that the suite can begin and end captures on a runtime's streams.
tests_unit_check_capture_host_SOURCES = tests/unit/check_capture_host.c \
	backends/host/host.h backends/host/platform.c backends/host/streams.h \
	backends/host/streams.c backends/host/stream.h backends/host/queue.h \
	backends/host/stream.c backends/host/event.c backends/host/copy.c \
	backends/host/shared.c
tests_unit_check_capture_host_CFLAGS = $(AM_CFLAGS)
# (Flags of its own give it its own objects of the module's files; so for
# check_peers below.)
tests_unit_check_host_platform_CFLAGS = $(AM_CFLAGS)
# peers= read and checked over made-up machines: peers.c is plain C with no
# driver in it, so this runs wherever the tests do.
tests_unit_check_peers_SOURCES = tests/unit/check_peers.c backends/cuda/peers.h \
	backends/cuda/peers.c
tests_unit_check_peers_CFLAGS = $(AM_CFLAGS)
# The logging module through real runtimes; what it wrote is read back by
# the programs' reader of the log (tools/common).
tests_unit_check_logging_LDADD = tools/common/libxdmtools.la $(LDADD)

# The cuda module without a driver or a device: the refusals, and the fall
# back to host; with a GPU, what the platform reports.
if HAVE_CUDA
check_PROGRAMS += tests/unit/check_cuda_absent
TESTS += tests/unit/check_cuda_absent
tests_unit_check_cuda_absent_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
endif

# ---- conformance: the allocator contract, once, over every stack ----------
# The list of stacks is at the top of check_conformance.c: the host stacks
# everywhere, the cuda stacks where a GPU answers (probed in a child
# process, so that check's forked cases never inherit CUDA state).  Built
# with the cuda module, it takes the GPU tests' lock (tests/lib/cudatest.c)
# when it runs the cuda stacks.
conformance_tests = tests/conformance/check_conformance
check_PROGRAMS += $(conformance_tests)
TESTS += $(conformance_tests)
if HAVE_CUDA
conformance_cuda_cppflags = $(CUDA_CFLAGS) -DXDM_CONFORMANCE_CUDA
conformance_cuda_ldadd = tests/lib/libcudatest.la
endif
# The rmm backend's stacks join the cuda ones where it was built.
if HAVE_RMM
conformance_rmm_cppflags = -DXDM_CONFORMANCE_RMM
endif
tests_conformance_check_conformance_CPPFLAGS = $(AM_CPPFLAGS) $(conformance_cuda_cppflags) \
	$(conformance_rmm_cppflags)
tests_conformance_check_conformance_LDADD = $(conformance_cuda_ldadd) $(LDADD) -lrt

# ---- process: several processes --------------------------------------------
# The budget across real processes: budget_worker is the program each of
# them execs, so that its pid is the one the segment records.
# check_budget_kill kills a worker at every step of a change of the
# accounting (the fault build of the module, below); budget_torture kills
# workers at random for 3 s while the limit flips; check_budget_credit
# covers per-thread credit, check_budget_auto the rule of credit=auto, the
# default; check_budget_segment refuses segments that are
# not what they should be.  check_users runs, as root, another local user
# against a segment and a tree (a skip otherwise); check_tenants runs, as
# root, users of a group and one outside it against the budget directory
# they share and the log's file; check_ipc_users runs, as root, another
# user against an exporter's socket: who is admitted, what a forger gets,
# clients that would freeze it (tests/lib/users.c makes the users;
# check_users and check_tenants run one as a process told what to do
# through a pipe, tests/lib/user_agent.c).
process_tests = \
	tests/process/check_budget \
	tests/process/check_budget_kill \
	tests/process/check_budget_credit \
	tests/process/check_budget_auto \
	tests/process/check_budget_segment \
	tests/process/check_budget_groups \
	tests/process/budget_torture \
	tests/process/check_users \
	tests/process/check_tenants \
	tests/process/check_ipc \
	tests/process/check_ipc_users
check_PROGRAMS += $(process_tests) tests/process/budget_worker tests/process/ipc_peer
TESTS += $(process_tests)
tests_process_check_budget_LDFLAGS = $(test_exec_flags)
tests_process_check_budget_LDADD = $(LDADD) -lrt
tests_process_check_budget_kill_LDFLAGS = $(test_exec_flags)
tests_process_check_budget_kill_LDADD = $(LDADD) -lrt
tests_process_check_budget_credit_LDFLAGS = $(test_exec_flags)
tests_process_check_budget_credit_LDADD = $(LDADD) -lrt
tests_process_check_budget_auto_LDFLAGS = $(test_exec_flags)
tests_process_check_budget_auto_LDADD = $(LDADD) -lrt
tests_process_check_budget_segment_LDADD = $(LDADD) -lrt
tests_process_check_budget_groups_LDFLAGS = $(test_exec_flags)
tests_process_check_budget_groups_LDADD = $(LDADD) -lrt
tests_process_budget_torture_LDFLAGS = $(test_exec_flags)
tests_process_budget_torture_LDADD = libxdm.la
tests_process_budget_worker_LDFLAGS = $(test_exec_flags)
tests_process_budget_worker_LDADD = libxdm.la
tests_process_check_users_SOURCES = tests/process/check_users.c tests/lib/users.c \
	tests/lib/user_agent.c
tests_process_check_users_LDFLAGS = $(test_exec_flags)
tests_process_check_users_LDADD = $(LDADD) -lrt
tests_process_check_tenants_SOURCES = tests/process/check_tenants.c tests/lib/users.c \
	tests/lib/users.h tests/lib/user_agent.c tests/lib/user_agent.h
tests_process_check_tenants_LDFLAGS = $(test_exec_flags)
# Blocks shared between processes on the host platform's memfd twin:
# ipc_peer is the program each exporter and importer execs.
tests_process_check_ipc_LDFLAGS = $(test_exec_flags)
tests_process_check_ipc_LDADD = $(LDADD) -lrt
tests_process_check_ipc_users_SOURCES = tests/process/check_ipc_users.c tests/lib/users.c
tests_process_check_ipc_users_LDFLAGS = $(test_exec_flags)
tests_process_check_ipc_users_LDADD = $(LDADD) -lrt
tests_process_ipc_peer_LDFLAGS = $(test_exec_flags)
tests_process_ipc_peer_LDADD = libxdm.la -lpthread

# The budget module with kill points (lib/budget_segment/faults.c): a process
# that loads it from tests/faults/.libs stops itself at the step
# $XDM_BUDGET_FAULT names, so the suite can kill it there.  Never installed.
noinst_LTLIBRARIES += tests/faults/budget.la
tests_faults_budget_la_SOURCES = $(adaptors_budget_la_SOURCES) $(budget_segment_sources) \
	lib/budget_segment/faults.c
tests_faults_budget_la_CPPFLAGS = $(AM_CPPFLAGS) -DXDM_BUDGET_FAULTS
tests_faults_budget_la_LDFLAGS = $(test_module_link_flags)
tests_faults_budget_la_LIBADD = lib/names/libnames.la $(module_link_libs) -lrt

# The tree through a real FUSE mount: fuse_walk reads it from another
# process (check_fusefs spawns it; it also serves a person who wants to
# time a walk by hand); the lifecycle script kills and restarts xdm-bench
# over one mount point.
EXTRA_DIST += tests/process/fusefs_lifecycle.sh
if HAVE_FUSE
check_PROGRAMS += tests/process/check_fusefs tests/process/fuse_walk
TESTS += tests/process/check_fusefs tests/process/fusefs_lifecycle.sh
tests_process_check_fusefs_LDFLAGS = $(test_exec_flags)
tests_process_check_fusefs_LDADD = $(LDADD) -lrt
tests_process_fuse_walk_LDADD =
endif

# One budget across containers: namespaces of their own, a shared directory
# (root and unshare(1), else a skip).
TESTS += tests/process/containers.sh
EXTRA_DIST += tests/process/containers.sh tests/lib/background.sh

# One budget per physical device under any device order: host devices here,
# two GPUs in tests/gpu/devices_gpu.sh.
TESTS += tests/process/devices_order.sh
EXTRA_DIST += tests/process/devices_order.sh tests/process/devices_order_body.sh

# ---- tools: the programs ---------------------------------------------------
# xdm-bench's workloads once each; xdmctl ps and budget against live
# processes, in groups, containers and a pid namespace of their own;
# metrics and serve scraped (curl, promtool where installed) and checked
# against ps; top in a real terminal (tmux), timeline and snapshot from logs
# that timeline_gen.py simulates, whose true figures it knows without
# reading the CSV back (snapshot's read back the way PyTorch's viewer
# reads it).
tools_live_tests = \
	tests/tools/configure_rmm.sh \
	tests/tools/bench_smoke.sh \
	tests/tools/xdmctl_ps.sh \
	tests/tools/xdmctl_groups.sh \
	tests/tools/xdmctl_serve.sh \
	tests/tools/xdmctl_top.sh
tools_log_tests = \
	tests/tools/xdmctl_timeline.sh \
	tests/tools/xdmctl_snapshot.sh
# Hostile neighbours: another user's segment cut short and grown back
# while xdmctl reads it (segment_churn, run as that user), skipped where
# anyone could have made it, set by root only as its owner; serve with
# slow clients that must keep no scrape out, bound to loopback by default.
tools_live_tests += \
	tests/tools/xdmctl_hostile.sh \
	tests/tools/xdmctl_serve_slow.sh
check_PROGRAMS += tests/tools/segment_churn
tests_tools_segment_churn_LDFLAGS = $(test_exec_flags)
# No libxdm: the other user runs a copy of it, with no access to the build tree.
tests_tools_segment_churn_LDADD =
# snapshot of a live process: chunks_holder keeps blocks of a pool and of
# host memory with its tree mounted, and xdmctl reads its chunks files;
# then chunks files that are not (bad lines, mangled bytes, a FIFO).
tools_live_tests += tests/tools/xdmctl_snapshot_live.sh
check_PROGRAMS += tests/tools/chunks_holder
tests_tools_chunks_holder_LDFLAGS = $(test_exec_flags)
tests_tools_chunks_holder_LDADD = libxdm.la
TESTS += $(tools_live_tests)
# xdmctl is one thread, and reading a log starts no other process: a
# ThreadSanitizer build has no race to find in these, so they run in the
# other builds only.
if !TSAN
TESTS += $(tools_log_tests)
endif
EXTRA_DIST += $(tools_live_tests) $(tools_log_tests) tests/tools/xdmctl_live_test.sh \
	tests/tools/xdmctl_log_test.sh tests/tools/timeline_gen.py tests/tools/metrics_check.py

# ---- python: the package on the host platform (pytest) --------------------
# Run once, in a build without sanitizers: the package is pure Python, and
# the C it calls is the C the suites run under each sanitizer; a sanitizer
# build would run the same Python again behind the sanitizer's runtime.
if !SANITIZED
TESTS += tests/python/python_tests.sh
endif
EXTRA_DIST += tests/python/python_tests.sh tests/python/conftest.py \
	tests/python/test_runtime.py tests/python/test_errors.py \
	tests/python/test_tags.py tests/python/test_tree.py \
	tests/python/test_imports.py tests/python/test_frameworks.py tests/python/test_rmm.py \
	tests/python/test_library_search.py tests/python/test_packaging.py \
	tests/python/test_sitedir.py tests/python/test_pytest_plugin.py \
	tests/python/test_ipc.py tests/python/test_torch_conf.py \
	tests/python/test_torch_suite.py
# make install and pip install, checked by tests/ci.sh (not by make check:
# it installs, into DESTDIR and a venv).
EXTRA_DIST += tests/python/install_check.sh

# ---- gpu: each skips (77) where there is no GPU ----------------------------
# The framework tests (pytest) skip where python3 has no torch with CUDA.
TESTS += tests/gpu/gpu_python.sh
EXTRA_DIST += tests/gpu/gpu_python.sh tests/gpu/conftest.py tests/gpu/test_torch.py \
	tests/gpu/test_torch_parity.py \
	tests/gpu/test_shared_budget.py tests/gpu/test_cupy_numba.py \
	tests/gpu/test_pytest_workers.py tests/gpu/test_preload.py tests/gpu/preload_rt_user.c
# torch's own allocator tests (its test_cuda.py) under torch and under xdm,
# run by hand on a GPU machine (README, Tests).
EXTRA_DIST += tests/gpu/torch_suite.py
# The multi-process budget with a CUDA stack; two processes seeing two GPUs
# in opposite orders; the Compute Sanitizer gate (doc/sanitizer-gate.md).
EXTRA_DIST += tests/gpu/budget_gpu.sh tests/gpu/devices_gpu.sh tests/gpu/sanitizer_gate.sh \
	tests/gpu/containers_gpu.sh
# What the gate captured: named *.log so that a copy of the build tree's
# test logs brings them back with them.
CLEANFILES += tests/gpu/sanitizer-*.log

if HAVE_CUDA
# The suites reach libcuda by dlopen through tests/lib/cudatest.c (hence
# $(LIBS), -ldl where needed, which automake appends to every link); one
# process each, no fork (CUDA state does not survive it).
check_LTLIBRARIES += tests/lib/libcudatest.la
tests_lib_libcudatest_la_SOURCES = tests/lib/cudatest.c
tests_lib_libcudatest_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)

gpu_suites = \
	tests/gpu/check_cuda \
	tests/gpu/check_native_cuda \
	tests/gpu/check_vmm_cuda \
	tests/gpu/check_peer_cuda \
	tests/gpu/check_pool_cuda \
	tests/gpu/check_pool_vmm_cuda \
	tests/gpu/check_guard_cuda \
	tests/gpu/check_capture_cuda \
	tests/gpu/check_ipc_cuda
check_PROGRAMS += $(gpu_suites) tests/gpu/cuda_oob tests/gpu/ipc_peer_cuda
TESTS += $(gpu_suites) tests/gpu/sanitizer_gate.sh tests/gpu/budget_gpu.sh \
	tests/gpu/devices_gpu.sh tests/gpu/containers_gpu.sh
gpu_cppflags = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
gpu_ldadd = tests/lib/libcudatest.la $(LDADD)
tests_gpu_check_cuda_CPPFLAGS = $(gpu_cppflags)
tests_gpu_check_cuda_LDFLAGS = $(test_exec_flags)
tests_gpu_check_cuda_LDADD = $(gpu_ldadd)
tests_gpu_check_native_cuda_CPPFLAGS = $(gpu_cppflags)
tests_gpu_check_native_cuda_LDFLAGS = $(test_exec_flags)
tests_gpu_check_native_cuda_LDADD = $(gpu_ldadd)
# cuda_vmm under the test's own adaptor, which calls allocate_at and
# partial releases as a pool would.
tests_gpu_check_vmm_cuda_CPPFLAGS = $(gpu_cppflags)
tests_gpu_check_vmm_cuda_LDFLAGS = $(test_exec_flags)
tests_gpu_check_vmm_cuda_LDADD = $(gpu_ldadd)
# peers= on two GPUs (a skip on fewer, or two without peer access).
tests_gpu_check_peer_cuda_CPPFLAGS = $(gpu_cppflags)
tests_gpu_check_peer_cuda_LDFLAGS = $(test_exec_flags)
tests_gpu_check_peer_cuda_LDADD = $(gpu_ldadd)
tests_gpu_check_pool_cuda_CPPFLAGS = $(gpu_cppflags)
tests_gpu_check_pool_cuda_LDFLAGS = $(test_exec_flags)
tests_gpu_check_pool_cuda_LDADD = $(gpu_ldadd)
tests_gpu_check_pool_vmm_cuda_CPPFLAGS = $(gpu_cppflags)
tests_gpu_check_pool_vmm_cuda_LDFLAGS = $(test_exec_flags)
tests_gpu_check_pool_vmm_cuda_LDADD = $(gpu_ldadd)
tests_gpu_check_guard_cuda_CPPFLAGS = $(gpu_cppflags)
tests_gpu_check_guard_cuda_LDFLAGS = $(test_exec_flags)
tests_gpu_check_guard_cuda_LDADD = $(gpu_ldadd)
# CUDA graph capture: private runtimes in a global-mode capture.
tests_gpu_check_capture_cuda_CPPFLAGS = $(gpu_cppflags)
tests_gpu_check_capture_cuda_LDFLAGS = $(test_exec_flags)
tests_gpu_check_capture_cuda_LDADD = $(gpu_ldadd)
# Sharing between processes on the GPU: the IPC suite's peer, built again
# to touch memory with kernels (IPC_PEER_CUDA), and the suite that drives it.
tests_gpu_check_ipc_cuda_SOURCES = tests/gpu/check_ipc_cuda.c tests/lib/users.c
tests_gpu_check_ipc_cuda_CPPFLAGS = $(gpu_cppflags)
tests_gpu_check_ipc_cuda_LDFLAGS = $(test_exec_flags)
tests_gpu_check_ipc_cuda_LDADD = $(gpu_ldadd) -lrt
tests_gpu_ipc_peer_cuda_SOURCES = tests/process/ipc_peer.c
tests_gpu_ipc_peer_cuda_CPPFLAGS = $(gpu_cppflags) -DIPC_PEER_CUDA
tests_gpu_ipc_peer_cuda_LDFLAGS = $(test_exec_flags)
tests_gpu_ipc_peer_cuda_LDADD = tests/lib/libcudatest.la libxdm.la -lpthread
# The planted out-of-bounds write that the sanitizer gate must catch.
tests_gpu_cuda_oob_CPPFLAGS = $(gpu_cppflags)
tests_gpu_cuda_oob_LDFLAGS = $(test_exec_flags)
tests_gpu_cuda_oob_LDADD = tests/lib/libcudatest.la libxdm.la
endif

# xdm and RMM both ways (--with-rmm): the rmm backend, budget over an RMM
# pool, and xdm/rmm.hpp driven as a RAPIDS library drives RMM.  C++, with
# RMM's headers and the CUDA runtime.
if HAVE_RMM
check_PROGRAMS += tests/gpu/check_rmm_cuda
TESTS += tests/gpu/check_rmm_cuda
endif
tests_gpu_check_rmm_cuda_SOURCES = tests/gpu/check_rmm_cuda.cpp
tests_gpu_check_rmm_cuda_CPPFLAGS = $(AM_CPPFLAGS) $(RMM_CPPFLAGS)
tests_gpu_check_rmm_cuda_CXXFLAGS = $(RMM_CXXFLAGS) $(PTHREAD_FLAGS) -Wall
tests_gpu_check_rmm_cuda_LDFLAGS = $(test_exec_flags)
tests_gpu_check_rmm_cuda_LDADD = tests/lib/libcudatest.la $(LDADD) $(RMM_LIBS)

# ---- modules: one loader failure each -------------------------------------
# Real dlopen modules (-rpath makes libtool build a shared object although
# it is never installed), loaded by tests/unit/check_loader.
test_modules = \
	tests/modules/bad_abi.la \
	tests/modules/newer_minor.la \
	tests/modules/small_ops.la \
	tests/modules/no_entry.la \
	tests/modules/bad_kind.la \
	tests/modules/dup.la \
	tests/modules/wrongname.la \
	tests/modules/no_alloc.la
noinst_LTLIBRARIES += $(test_modules)
tests_modules_bad_abi_la_LDFLAGS = $(test_module_link_flags)
tests_modules_bad_abi_la_LIBADD = $(module_link_libs)
tests_modules_newer_minor_la_LDFLAGS = $(test_module_link_flags)
tests_modules_newer_minor_la_LIBADD = $(module_link_libs)
tests_modules_small_ops_la_LDFLAGS = $(test_module_link_flags)
tests_modules_small_ops_la_LIBADD = $(module_link_libs)
tests_modules_no_entry_la_LDFLAGS = $(test_module_link_flags)
tests_modules_no_entry_la_LIBADD = $(module_link_libs)
tests_modules_bad_kind_la_LDFLAGS = $(test_module_link_flags)
tests_modules_bad_kind_la_LIBADD = $(module_link_libs)
tests_modules_dup_la_LDFLAGS = $(test_module_link_flags)
tests_modules_dup_la_LIBADD = $(module_link_libs)
tests_modules_wrongname_la_LDFLAGS = $(test_module_link_flags)
tests_modules_wrongname_la_LIBADD = $(module_link_libs)
tests_modules_no_alloc_la_LDFLAGS = $(test_module_link_flags)
tests_modules_no_alloc_la_LIBADD = $(module_link_libs)

# ---- preload: the LD_PRELOAD shim over a fake driver ----------------------
# check_preload runs the programs below under libxdm-preload.so, with no GPU
# and no toolkit, and watches their budget from outside.  Beside it:
# - fake/libcuda.la: a fake driver, bookkeeping in place of memory; a
#   versioned library (not a module) so that libtool names it libcuda.so.1,
#   the driver's soname, in tests/preload/fake/.libs, which the tests put in
#   LD_LIBRARY_PATH.
# - preload_user: an unmodified CUDA program that allocates as its
#   arguments say; it reaches the driver as the CUDA runtime does (dlopen,
#   then cuGetProcAddress), so it links no driver ($(LIBS) brings -ldl
#   where dlopen needs it).
# - preload_user_linked: the same program built against the fake as a
#   program built with -lcuda is, calling the driver's symbols by name.
# - xdm_like_module.la: looks like one of xdm's modules to the shim (it
#   exports xdm_module_entry) and allocates through its own dlopen of the
#   driver, as the cuda backend does.
# - fake/libnvidia-ml.la: a fake NVML over the fake driver's devices, for
#   the shim's rewrite of nvmlDeviceGetMemoryInfo.
# - next_a.la, next_b.la: two interposers preloaded after the shim; a's
#   dlsym(RTLD_NEXT) must find b's symbol, not its own.
check_LTLIBRARIES += tests/preload/fake/libcuda.la tests/preload/xdm_like_module.la \
	tests/preload/fake/libnvidia-ml.la tests/preload/next_a.la tests/preload/next_b.la
check_PROGRAMS += tests/preload/preload_user tests/preload/preload_user_linked
tests_preload_fake_libcuda_la_SOURCES = tests/preload/fake_cuda.c tests/preload/fake_cuda.h \
	tests/preload/fake_uuid.h preload/cuda_abi.h
tests_preload_fake_libcuda_la_LDFLAGS = $(AM_LDFLAGS) -rpath /nowhere -version-info 1:0:0 \
	-no-undefined
tests_preload_fake_libcuda_la_LIBADD = -lpthread
tests_preload_next_a_la_SOURCES = tests/preload/next_a.c
tests_preload_next_a_la_LDFLAGS = $(AM_LDFLAGS) -module -avoid-version -shared -no-undefined \
	-rpath /nowhere
tests_preload_next_b_la_SOURCES = tests/preload/next_b.c
tests_preload_next_b_la_LDFLAGS = $(tests_preload_next_a_la_LDFLAGS)
tests_preload_fake_libnvidia_ml_la_SOURCES = tests/preload/fake_nvml.c tests/preload/fake_uuid.h
tests_preload_fake_libnvidia_ml_la_LDFLAGS = $(AM_LDFLAGS) -rpath /nowhere -version-info 1:0:0 \
	-no-undefined
tests_preload_xdm_like_module_la_SOURCES = tests/preload/xdm_like_module.c preload/cuda_abi.h
tests_preload_xdm_like_module_la_LDFLAGS = $(AM_LDFLAGS) -module -avoid-version -shared \
	-no-undefined -rpath /nowhere
tests_preload_preload_user_SOURCES = tests/preload/preload_user.c preload/cuda_abi.h
tests_preload_preload_user_LDFLAGS = $(test_exec_flags)
tests_preload_preload_user_LDADD = -lpthread
tests_preload_preload_user_linked_SOURCES = tests/preload/preload_user.c \
	tests/preload/fake_cuda.h preload/cuda_abi.h
tests_preload_preload_user_linked_CPPFLAGS = $(AM_CPPFLAGS) -DPRELOAD_USER_LINKED
tests_preload_preload_user_linked_LDFLAGS = $(test_exec_flags)
tests_preload_preload_user_linked_LDADD = tests/preload/fake/libcuda.la -lpthread
preload_tests = tests/preload/check_preload
TESTS += $(preload_tests)
check_PROGRAMS += $(preload_tests)
tests_preload_check_preload_LDADD = lib/budget_segment/libbudget_segment.la $(LDADD) -lrt
# The shim declares the driver's ABI itself (preload/cuda_abi.h): where the
# toolkit's cuda.h is, its values and layouts are checked against it at
# compile time; the program links no driver.
if HAVE_CUDA
TESTS += tests/preload/check_cuda_abi
check_PROGRAMS += tests/preload/check_cuda_abi
tests_preload_check_cuda_abi_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
tests_preload_check_cuda_abi_LDADD =
else
EXTRA_DIST += tests/preload/check_cuda_abi.c
endif

# ---- k8s deploy: the manifests of deploy/ --------------------------------
# deploy.sh reads deploy/ (with deploy_check.py's reader of the YAML it is
# written in) and checks it against the plugin's man page, --help and
# Allocate (tests/k8s/xdm_k8s_allocate over the fake NVML of the k8s block
# below, where they are built), and against doc/kubernetes.md.
TESTS += tests/k8s/deploy.sh
EXTRA_DIST += tests/k8s/deploy.sh tests/k8s/deploy_check.py

# ---- out of tree, against the installed xdm --------------------------------
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

# ---- fuzz: one libFuzzer target per parser that takes text or bytes from outside
# (configure --enable-fuzzing, with CC=clang).  tests/fuzz/run.sh builds and
# runs them over their seed corpora in tests/fuzz/corpus/<target>/;
# DESIGN-NOTES.md ("Fuzzing") says how to run them for long.
fuzz_targets = \
	tests/fuzz/fuzz_config \
	tests/fuzz/fuzz_stack \
	tests/fuzz/fuzz_size \
	tests/fuzz/fuzz_tree_store \
	tests/fuzz/fuzz_logcsv \
	tests/fuzz/fuzz_ipc_handle \
	tests/fuzz/fuzz_ipc_server

# The sources are distributed whether or not this build fuzzes; so are the
# corpora and dictionaries (a directory in EXTRA_DIST is copied whole) and
# the runner.
EXTRA_DIST += tests/fuzz/run.sh tests/fuzz/corpus tests/fuzz/dict
noinst_HEADERS += tests/fuzz/fuzz.h tests/fuzz/conf_text.h

if FUZZING
noinst_PROGRAMS += $(fuzz_targets)
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

# IPC handles come from other processes over any channel: the decoder meets
# whatever bytes arrive.
tests_fuzz_fuzz_ipc_handle_SOURCES = tests/fuzz/fuzz_ipc_handle.c
tests_fuzz_fuzz_ipc_handle_LDFLAGS = $(fuzz_link_flags)
tests_fuzz_fuzz_ipc_handle_LDADD = core/libxdmcore.la

# The exporter's server meets whatever an admitted peer sends: its requests
# and answers, on a runtime of the core alone (no module: blocks of bytes).
tests_fuzz_fuzz_ipc_server_SOURCES = tests/fuzz/fuzz_ipc_server.c
tests_fuzz_fuzz_ipc_server_LDFLAGS = $(fuzz_link_flags)
tests_fuzz_fuzz_ipc_server_LDADD = core/libxdmcore.la

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


# The one reader of the logging CSV (tools/common/logcsv.c), linked as
# xdm-bench, xdmctl and the logging suite link it.
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

# ---- k8s: xdm-device-plugin (tools/device-plugin) --------------------------
# - xdm_k8s_allocate: the plugin's Allocate answer for given devices,
#   without gRPC (built by plain make: tests/gpu/k8s_pods_gpu.sh uses it
#   on the GPU machine, which has no gRPC);
# - fake/libnvidia-ml.la: a fake NVML of the fake driver's GPUs
#   (tests/preload/fake_cuda.c), one of which a test can make disappear;
# - check_dp: the plugin's logic (units, IDs, packing, Allocate's answer,
#   the budget directory) on GPUs made by hand, in every build;
# - plugin.sh: the plugin against fake_kubelet, a kubelet built from the
#   same api.proto: registration, ListAndWatch, packing, Allocate, a
#   kubelet that restarts, a GPU that disappears, SIGTERM;
# - pods.sh: two pods started with exactly what Allocate answered, each in
#   namespaces of its own over the fake driver: each refused past its
#   units, and one killed with SIGKILL giving its bytes back.
# plugin.sh and pods.sh skip (77) where the plugin is not built (no gRPC).
noinst_PROGRAMS += tests/k8s/xdm_k8s_allocate
tests_k8s_xdm_k8s_allocate_SOURCES = tests/k8s/xdm_k8s_allocate.c
tests_k8s_xdm_k8s_allocate_LDADD = tools/device-plugin/libdp.la
check_LTLIBRARIES += tests/k8s/fake/libnvidia-ml.la
tests_k8s_fake_libnvidia_ml_la_SOURCES = tests/k8s/fake_nvml.c tests/preload/fake_uuid.h
tests_k8s_fake_libnvidia_ml_la_LDFLAGS = $(AM_LDFLAGS) -rpath /nowhere -version-info 1:0:0 \
	-no-undefined
TESTS += tests/k8s/check_dp tests/k8s/plugin.sh tests/k8s/pods.sh
check_PROGRAMS += tests/k8s/check_dp
tests_k8s_check_dp_LDADD = tools/device-plugin/libdp.la $(CHECK_LIBS)
EXTRA_DIST += tests/k8s/plugin.sh tests/k8s/pods.sh tests/k8s/pod.sh \
	tests/k8s/fake_kubelet.cc
# On a GPU: two pods (torch, JAX) through xdm_k8s_allocate over the real
# NVML, each held to its slice; skips (77) without a GPU.
TESTS += tests/gpu/k8s_pods_gpu.sh
EXTRA_DIST += tests/gpu/k8s_pods_gpu.sh
if HAVE_DEVICE_PLUGIN
check_PROGRAMS += tests/k8s/fake_kubelet
tests_k8s_fake_kubelet_SOURCES = tests/k8s/fake_kubelet.cc
tests_k8s_fake_kubelet_CPPFLAGS = $(dp_cppflags)
tests_k8s_fake_kubelet_CXXFLAGS = $(dp_cxxflags)
tests_k8s_fake_kubelet_LDADD = tools/device-plugin/libdpapi.la $(GRPC_LIBS)
tests/k8s/fake_kubelet-fake_kubelet.$(OBJEXT): tools/device-plugin/api.stamp
endif
