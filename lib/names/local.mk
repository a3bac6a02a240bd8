# lib/names: a user's or a group's name for a sentence, or its number
# where the name service has none.  The budget segment's library (which
# carries it to the budget module, the preload shim and xdmctl), the
# logging module and xdmctl link it; a convenience library, never installed.
noinst_LTLIBRARIES += lib/names/libnames.la
lib_names_libnames_la_SOURCES = \
	lib/names/names.h \
	lib/names/names.c
