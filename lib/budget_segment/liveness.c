/* SPDX-License-Identifier: MIT */
/*
 * liveness.c - whether the process of a slot still runs, and who it is.
 *
 * A pid means nothing outside its pid namespace: two containers on one
 * GPU each have a pid 1, and a process of one cannot signal or read
 * /proc of the other.  So a process is alive while it holds a lock the
 * kernel takes back at its death: an open-file-description lock (fcntl
 * F_OFD_SETLK) on its slot's first byte of the segment file.  Any process
 * that has the file open can ask whether another open file holds it
 * (F_OFD_GETLK), across namespaces.
 *
 * The kernel may let go of a dead process's open files a moment after its
 * parent reaped it (seen on a 6.18 kernel: the locks of a process killed
 * with SIGKILL were still there when its parent's waitpid returned).  So
 * where the asker shares the slot's pid namespace, the pid tells at once,
 * as it always did: gone, a zombie, or another process with the same pid
 * (another start time) is dead, whatever its lock still says.  Across
 * namespaces the lock is all there is, and a death is seen once the
 * kernel has closed the files.
 *
 * xdmctl(1) links this library too, so that it calls a process dead
 * exactly when a reclaimer would.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/budget_segment/segment.h"

/* The byte whose lock says that slot's process runs. */
static struct flock slot_lock(short type, unsigned int slot)
{
	struct flock l;

	memset(&l, 0, sizeof(l));
	l.l_type = type;
	l.l_whence = SEEK_SET;
	l.l_start = (off_t)(offsetof(struct budget_shm, slots) +
			    (size_t)slot * sizeof(struct budget_slot));
	l.l_len = 1;
	return l;
}

int budget_slot_hold(int fd, unsigned int slot)
{
	struct flock l = slot_lock(F_RDLCK, slot);

	return fcntl(fd, F_OFD_SETLK, &l) == 0 ? 0 : -errno;
}

void budget_slot_unhold(int fd, unsigned int slot)
{
	struct flock l = slot_lock(F_UNLCK, slot);

	fcntl(fd, F_OFD_SETLK, &l);
}

/* Whether another open file holds the slot's lock (an error: yes). */
static bool lock_held(int fd, unsigned int slot)
{
	/* A write lock would conflict with any holder's read lock. */
	struct flock l = slot_lock(F_WRLCK, slot);

	if (fcntl(fd, F_OFD_GETLK, &l) != 0)
		return true;
	return l.l_type != F_UNLCK;
}

/*
 * Whether pid, of the caller's own pid namespace, may still be the process
 * that started at start_time: false only where it is shown not to be.
 * ESRCH: gone.  A zombie, or another start time: another process (or
 * none).  The holders of a segment may be other users (a directory a
 * group shares), so a pid we may not signal (EPERM) proves nothing, and
 * where /proc hides other users' processes (hidepid) their start time
 * cannot be read: then the lock alone decides.
 */
static bool pid_may_run(pid_t pid, uint64_t start_time)
{
	bool foreign = false;
	uint64_t now_start;
	char state = '?';

	if (kill(pid, 0) != 0) {
		if (errno == ESRCH)
			return false;
		foreign = errno == EPERM;
	}
	if (budget_proc_identity(pid, &now_start, &state) != 0)
		return foreign;
	if (state == 'Z' || state == 'X')
		return false;
	return now_start == start_time;
}

bool budget_slot_alive(const struct budget_shm *s, int fd, unsigned int slot, uint64_t pidns)
{
	const struct budget_slot *row = &s->slots[slot];
	pid_t pid = atomic_load_explicit((_Atomic int32_t *)&row->pid, memory_order_acquire);

	if (pidns && row->pidns == pidns && pid > 0 && !pid_may_run(pid, row->start_time))
		return false;
	return lock_held(fd, slot);
}

/* Field 22 (start time) and the state letter of a /proc/.../stat file. */
static int read_stat(const char *path, uint64_t *start_time, char *state)
{
	char buf[1024];
	unsigned long long start;
	const char *p;
	ssize_t n;
	int fd, field;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -ENOENT;
	buf[n] = '\0';

	/* The command name (field 2) may hold blanks and parentheses: the
	 * fields are counted from the last ')'. */
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return -EINVAL;
	p += 2;
	if (state)
		*state = *p;
	for (field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return -EINVAL;
		p++;
	}
	if (sscanf(p, "%llu", &start) != 1)
		return -EINVAL;
	*start_time = start;
	return 0;
}

int budget_proc_identity(pid_t pid, uint64_t *start_time, char *state)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	return read_stat(path, start_time, state);
}

uint64_t budget_pidns_of(pid_t pid)
{
	char path[64];
	struct stat st;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/ns/pid");
	return stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* The first line of a /proc file, newline dropped; "" where unreadable. */
static void read_line(const char *path, char *out, size_t len)
{
	FILE *f = fopen(path, "re");

	out[0] = '\0';
	if (!f)
		return;
	if (fgets(out, (int)len, f))
		out[strcspn(out, "\n")] = '\0';
	fclose(f);
}

/*
 * The process's cgroup: the unified hierarchy's path ("0::/kubepods/...")
 * where there is one, else the first hierarchy's.  What a container
 * runtime puts a container in, as the host sees it.
 */
static void read_cgroup(char *out, size_t len)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[512], first[512] = "";

	out[0] = '\0';
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		const char *path = strchr(line, ':');

		line[strcspn(line, "\n")] = '\0';
		path = path ? strchr(path + 1, ':') : NULL;
		if (!path)
			continue;
		if (!strncmp(line, "0::", 3)) {
			snprintf(out, len, "%s", path + 1);
			fclose(f);
			return;
		}
		if (!first[0])
			snprintf(first, sizeof(first), "%s", path + 1);
	}
	fclose(f);
	snprintf(out, len, "%s", first);
}

int budget_self_identity(const char *name, uint64_t *start_time, uint64_t *pidns,
			 char comm[BUDGET_COMM_MAX], char container[BUDGET_CONTAINER_MAX])
{
	/* /proc/self, not /proc/<getpid()>: in a pid namespace of its own
	 * that still sees the host's /proc, the two are other processes. */
	int err = read_stat("/proc/self/stat", start_time, NULL);

	if (err)
		return err;
	*pidns = budget_pidns_of(0);
	read_line("/proc/self/comm", comm, BUDGET_COMM_MAX);
	if (name && *name)
		snprintf(container, BUDGET_CONTAINER_MAX, "%s", name);
	else
		read_cgroup(container, BUDGET_CONTAINER_MAX);
	return 0;
}
