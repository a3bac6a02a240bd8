# adaptors/logging: the CSV allocation log, one module (logging.so).
# See man/xdm-logging.7.
pkglib_LTLIBRARIES += adaptors/logging.la
adaptors_logging_la_SOURCES = \
	adaptors/logging/logging.h \
	adaptors/logging/row.h \
	adaptors/logging/module.c \
	adaptors/logging/ring.c \
	adaptors/logging/drain.c \
	adaptors/logging/writer.c \
	adaptors/logging/sink.c \
	adaptors/logging/file_open.c \
	adaptors/logging/csv.c \
	adaptors/logging/attrs.c \
	adaptors/logging/exit.c
adaptors_logging_la_LDFLAGS = $(module_link_flags)
adaptors_logging_la_LIBADD = lib/names/libnames.la $(module_link_libs)

dist_man_MANS += man/xdm-logging.7
