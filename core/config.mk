# core/config: the xdm.conf parser and size parsing (part of libxdmcore).
core_libxdmcore_la_SOURCES += core/config.h core/config.c core/size.c
