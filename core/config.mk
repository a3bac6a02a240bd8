# core/config: the xdm.conf parser and size parsing (part of libxdmcore).
core_libxdmcore_la_SOURCES += core/conf.h core/config.c core/size.c

# The format's manual and a commented sample, installed in $(docdir).
dist_man_MANS += man/xdm.conf.5
dist_doc_DATA += examples/xdm.conf
