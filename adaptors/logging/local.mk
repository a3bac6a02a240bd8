# adaptors/logging: the CSV allocation log, one module (logging.so).
# See man/xdm-logging.7.
pkglib_LTLIBRARIES += adaptors/logging.la
adaptors_logging_la_SOURCES = \
	adaptors/logging/logging.h \
	adaptors/logging/module.c \
	adaptors/logging/ring.c \
	adaptors/logging/drain.c \
	adaptors/logging/writer.c \
	adaptors/logging/sink.c \
	adaptors/logging/csv.c \
	adaptors/logging/attrs.c \
	adaptors/logging/exit.c
adaptors_logging_la_LDFLAGS = $(module_link_flags)
adaptors_logging_la_LIBADD = $(module_link_libs)

# The suite runs the module through real runtimes on the host platform and
# replays what it wrote (tests/log_replay.c parses and replays the CSV).
check_PROGRAMS += tests/check_logging
TESTS += tests/check_logging
tests_check_logging_SOURCES = \
	tests/check_logging.c \
	tests/log_replay.c \
	tests/log_replay.h
tests_check_logging_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_logging_LDADD = libxdm.la $(CHECK_LIBS)

dist_man_MANS += man/xdm-logging.7
