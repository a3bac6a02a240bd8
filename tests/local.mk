# tests/: check suites of the core.  Each suite is its own program.
EXTRA_DIST += tests/data/host.conf
