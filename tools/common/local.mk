# tools/common: code that more than one program of tools/ needs, built once
# as a convenience library.  logcsv is the one reader of the logging
# adaptor's CSV (xdm-logging(7)): xdm-bench replays a log with it, xdmctl
# draws one, and the tests and a fuzz target read logs with it, so that a
# file one accepts the others accept.  Nothing here is part of libxdm.
noinst_LTLIBRARIES += tools/common/libxdmtools.la
tools_common_libxdmtools_la_SOURCES = \
	tools/common/logcsv.h \
	tools/common/logcsv.c
