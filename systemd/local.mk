# systemd/: what makes the budget directory the users of a machine share
# (configure --with-budget-dir, --with-budget-group): a tmpfiles.d entry
# that creates it at boot, root's, of the group, mode 2770, and a
# sysusers.d entry that creates the group.  Made from their .in at make
# time; installed unless configure was given --with-tmpfilesdir=no or
# --with-sysusersdir=no.  After make install, as root:
#	systemd-sysusers && systemd-tmpfiles --create xdm.conf
EXTRA_DIST += systemd/tmpfiles.conf.in systemd/sysusers.conf.in
CLEANFILES += systemd/xdm-tmpfiles.conf systemd/xdm-sysusers.conf
all-local: systemd/xdm-tmpfiles.conf systemd/xdm-sysusers.conf

systemd/xdm-tmpfiles.conf: $(srcdir)/systemd/tmpfiles.conf.in Makefile
	$(AM_V_GEN)$(MKDIR_P) systemd && \
	sed -e 's|@BUDGET_DIR[@]|$(budget_shared_dir)|g' \
	    -e 's|@BUDGET_GROUP[@]|$(budget_shared_group)|g' \
		$(srcdir)/systemd/tmpfiles.conf.in >$@.tmp && mv $@.tmp $@
systemd/xdm-sysusers.conf: $(srcdir)/systemd/sysusers.conf.in Makefile
	$(AM_V_GEN)$(MKDIR_P) systemd && \
	sed -e 's|@BUDGET_DIR[@]|$(budget_shared_dir)|g' \
	    -e 's|@BUDGET_GROUP[@]|$(budget_shared_group)|g' \
		$(srcdir)/systemd/sysusers.conf.in >$@.tmp && mv $@.tmp $@

# Installed under the name systemd looks for (xdm.conf), from the names
# they have here (one per directory would clash in the build tree).
install-data-local: install-systemd-data
uninstall-local: uninstall-systemd-data
install-systemd-data: systemd/xdm-tmpfiles.conf systemd/xdm-sysusers.conf
if INSTALL_TMPFILES
	$(MKDIR_P) '$(DESTDIR)$(tmpfilesdir)'
	$(INSTALL_DATA) systemd/xdm-tmpfiles.conf '$(DESTDIR)$(tmpfilesdir)/xdm.conf'
endif
if INSTALL_SYSUSERS
	$(MKDIR_P) '$(DESTDIR)$(sysusersdir)'
	$(INSTALL_DATA) systemd/xdm-sysusers.conf '$(DESTDIR)$(sysusersdir)/xdm.conf'
endif
uninstall-systemd-data:
if INSTALL_TMPFILES
	rm -f '$(DESTDIR)$(tmpfilesdir)/xdm.conf'
endif
if INSTALL_SYSUSERS
	rm -f '$(DESTDIR)$(sysusersdir)/xdm.conf'
endif
.PHONY: install-systemd-data uninstall-systemd-data
