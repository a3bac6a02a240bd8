# adaptors/guard: the debug guard, canaries around blocks, poison on free and
# a quarantine before reuse.  See man/xdm-guard.7.
pkglib_LTLIBRARIES += adaptors/guard.la
adaptors_guard_la_SOURCES = \
	adaptors/guard/guard.h \
	adaptors/guard/module.c \
	adaptors/guard/live.c \
	adaptors/guard/scan.c \
	adaptors/guard/canary.c \
	adaptors/guard/poison.c \
	adaptors/guard/quarantine.c \
	adaptors/guard/checker.c \
	adaptors/guard/report.c \
	adaptors/guard/attrs.c
adaptors_guard_la_LDFLAGS = $(module_link_flags)
adaptors_guard_la_LIBADD = $(module_link_libs)

dist_man_MANS += man/xdm-guard.7
