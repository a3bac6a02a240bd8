# core/config: the xdm.conf parser and size parsing (part of libxdmcore).
core_libxdmcore_la_SOURCES += core/conf.h core/config.c core/size.c

# Its suite calls the parser's internal functions, so it links the
# convenience library rather than libxdm, which exports only xdm_ symbols.
check_PROGRAMS += tests/check_config
TESTS += tests/check_config
tests_check_config_SOURCES = tests/check_config.c
tests_check_config_CPPFLAGS = $(AM_CPPFLAGS) -DXDM_TEST_SRCDIR='"$(abs_top_srcdir)"'
tests_check_config_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_config_LDADD = core/libxdmcore.la $(CHECK_LIBS)

# The format's manual and a commented sample, installed in $(docdir).
dist_man_MANS += man/xdm.conf.5
dist_doc_DATA += examples/xdm.conf
