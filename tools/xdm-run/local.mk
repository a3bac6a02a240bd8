# tools/xdm-run: the preload shim's launcher (xdm-run(1)), a shell script
# with the shim's installed path in it.
bin_SCRIPTS += tools/xdm-run/xdm-run
CLEANFILES += tools/xdm-run/xdm-run
EXTRA_DIST += tools/xdm-run/xdm-run.in
tools/xdm-run/xdm-run: $(srcdir)/tools/xdm-run/xdm-run.in Makefile
	$(AM_V_GEN)$(MKDIR_P) tools/xdm-run && \
	sed -e 's|@libdir[@]|$(libdir)|g' $(srcdir)/tools/xdm-run/xdm-run.in > $@.tmp && \
	chmod +x $@.tmp && mv $@.tmp $@
dist_man_MANS += man/xdm-run.1
