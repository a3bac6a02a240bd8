/* SPDX-License-Identifier: MIT */
/*
 * nspid.c - where a process of a container is in xdmctl's pid namespace.
 *
 * A slot records its process's pid as the process's own pid namespace
 * sees it, and that namespace's inode.  A process of a namespace below
 * xdmctl's has a /proc entry here too, under another pid, and the
 * "NSpid:" line of its status lists its pid in every namespace from the
 * one of this /proc down to its own: the last is the slot's pid.  So the
 * process of a slot is the entry whose last NSpid is the slot's pid, whose
 * pid namespace is the slot's, and whose start time is the slot's (the
 * lock that keeps a slot alive can outlive its pid, in a child forked
 * without exec).  A pid is unique in its namespace, so no other entry can
 * match; a process of a namespace beside or above ours has no entry here,
 * and stays not found.  (A container with a time namespace of its own
 * reads start times shifted, and its processes stay not found too:
 * nothing wrong is ever shown, only nothing.)
 *
 * It costs one read of each /proc/<pid>/status of the machine, and is
 * made only when some live process is not of xdmctl's namespace.
 */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/budget_segment/segment.h"
#include "segments.h"

/* Whether p is one this search is for. */
static bool wanted(const struct xdmctl_proc *p)
{
	return !p->here && !p->pid_here && p->pidns && p->state != XDMCTL_PROC_DEAD;
}

/* The last pid of the NSpid line of /proc/<name>/status, if it has more than one; else 0. */
static pid_t inner_pid(const char *name)
{
	char path[64], buf[4096];
	const char *line, *p;
	long last = 0;
	int fields = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%s/status", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	line = strstr(buf, "\nNSpid:");
	if (!line)
		return 0;
	for (p = line + strlen("\nNSpid:"); *p && *p != '\n';) {
		char *end;

		while (*p == ' ' || *p == '\t')
			p++;
		if (!isdigit((unsigned char)*p))
			break;
		last = strtol(p, &end, 10);
		p = end;
		fields++;
	}
	return fields > 1 && last > 0 ? (pid_t)last : 0;
}

/* Whether the process /proc/<here> is p's; its state into *state. */
static bool is_it(pid_t here, const struct xdmctl_proc *p, char *state)
{
	uint64_t start;

	return budget_pidns_of(here) == p->pidns &&
	       budget_proc_identity(here, &start, state) == 0 && start == p->start_time;
}

void xdmctl_segments_find_pids(struct xdmctl_segment *segs, size_t n)
{
	size_t missing = 0;
	struct dirent *d;
	DIR *proc;

	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < segs[i].nprocs; k++)
			missing += wanted(&segs[i].procs[k]);
	if (!missing)
		return;
	proc = opendir("/proc");
	if (!proc)
		return;
	while (missing && (d = readdir(proc))) {
		pid_t inner, here;

		if (!isdigit((unsigned char)d->d_name[0]))
			continue;
		inner = inner_pid(d->d_name);
		if (!inner)
			continue;
		here = (pid_t)atol(d->d_name);
		for (size_t i = 0; i < n; i++) {
			for (size_t k = 0; k < segs[i].nprocs; k++) {
				struct xdmctl_proc *p = &segs[i].procs[k];
				char state = '?';

				if (p->pid != inner || !wanted(p) || !is_it(here, p, &state))
					continue;
				p->pid_here = here;
				if (state == 'T' || state == 't')
					p->state = XDMCTL_PROC_STOPPED;
				missing--;
			}
		}
	}
	closedir(proc);
}
