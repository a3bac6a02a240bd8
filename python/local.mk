# python/: the package `xdm`, pure Python over ctypes (doc/design.md: Frameworks).
# Installed with automake's Python support into $(pythondir)/xdm, so that
# --prefix and DESTDIR apply; xdm/_paths.py, made here, tells the installed
# package where libxdm and the modules went.  From the build tree the
# package runs from the source directory (./xdm-uninstalled sets
# PYTHONPATH and XDM_LIBRARY), without _paths.py.
xdm_python_sources = python/xdm/__init__.py python/xdm/_lib.py python/xdm/errors.py \
	python/xdm/runtime.py python/xdm/tags.py python/xdm/tree.py \
	python/xdm/cupy.py python/xdm/numba.py python/xdm/rmm.py python/xdm/torch.py \
	python/xdm/torch_conf.py python/xdm/pytest.py python/xdm/ipc.py
EXTRA_DIST += $(xdm_python_sources) python/xdm/_paths.py.in python/README.md

# For pip (`pip install ./python`): pyproject.toml and its build backend,
# in the tree and standard library only (python/README.md says why).
EXTRA_DIST += python/pyproject.toml python/pep517/xdm_backend.py

# Run by configure: where $PYTHON imports from under the prefix (pythondir).
EXTRA_DIST += python/sitedir.py

if HAVE_PYTHON
xdmpythondir = $(pythondir)/xdm
xdmpython_PYTHON = $(xdm_python_sources)
nodist_xdmpython_PYTHON = python/xdm/_paths.py
noinst_DATA = python/xdm/_paths.py
endif

# Expanded at make time: $(libdir) may name ${prefix}, and `make
# install prefix=...` after a plain `make` must be honoured too, so it is
# written on every make and replaced only when its text changes.
python/xdm/_paths.py: python/xdm/_paths.py-always
	$(AM_V_GEN)$(MKDIR_P) python/xdm && \
	sed -e 's|@libdir[@]|$(libdir)|g' -e 's|@pkglibdir[@]|$(pkglibdir)|g' \
	    -e 's|@budget_shared_dir[@]|$(budget_shared_dir)|g' \
		$(srcdir)/python/xdm/_paths.py.in >$@.tmp && \
	if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
python/xdm/_paths.py-always:
.PHONY: python/xdm/_paths.py-always
CLEANFILES += python/xdm/_paths.py
