/* SPDX-License-Identifier: MIT */
/*
 * tree_reader.c - --read-tree HZ: what reading the introspection tree
 * costs the workload, measured in one process.
 *
 * A second subject, "xdm+tree", is the same runtime as "xdm"; while one of
 * its runs is timed, a thread walks the whole mounted tree (every directory
 * listed, every file opened and read) HZ times a second through the FUSE
 * mount, as a person or a monitor would.  Its runs interleave with the quiet
 * runs of "xdm", so the ratio of the two is the cost of being read, free of
 * the run-to-run drift that separate processes would add.  Pausing waits
 * for a walk in progress to end: a quiet run is really quiet.  Starting
 * waits for the reader to begin a walk: a run of "xdm+tree" is timed only
 * once it is really read, even where the reader's thread is slow to get a
 * core, so every run overlaps at least one walk.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

struct bench_tree_reader {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* CLOCK_MONOTONIC */
	bool active, walking, quit;
	char root[PATH_MAX];
	uint64_t interval_ns;
	uint64_t walks, files, errors, active_ns, since_ns;
	uint64_t activations, walked;	/* walked: the last activation a walk began in */
};

static uint64_t to_ns(const struct timespec *t)
{
	return (uint64_t)t->tv_sec * 1000000000u + (uint64_t)t->tv_nsec;
}

static void read_file(struct bench_tree_reader *r, const char *path)
{
	char buf[4096];
	ssize_t n;
	int fd = open(path, O_RDONLY);

	if (fd < 0) {
		/* Blocks vanish between the listing and the open; actions are 0200. */
		if (errno != ENOENT && errno != EACCES)
			r->errors++;
		return;
	}
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		;
	if (n < 0 && errno != ENOENT)
		r->errors++;
	close(fd);
	r->files++;
}

static void walk(struct bench_tree_reader *r, const char *dir)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d = opendir(dir);

	if (!d) {
		if (errno != ENOENT)
			r->errors++;
		return;
	}
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= sizeof(path))
			continue;
		if (de->d_type == DT_UNKNOWN) {
			struct stat st;

			if (stat(path, &st) != 0)
				continue;	/* gone since the listing */
			de->d_type = S_ISDIR(st.st_mode) ? DT_DIR : DT_REG;
		}
		if (de->d_type == DT_DIR)
			walk(r, path);
		else
			read_file(r, path);
	}
	closedir(d);
}

static void *reader_main(void *arg)
{
	struct bench_tree_reader *r = arg;
	struct timespec now, next;

	clock_gettime(CLOCK_MONOTONIC, &next);
	pthread_mutex_lock(&r->lock);
	while (!r->quit) {
		if (!r->active) {
			pthread_cond_wait(&r->cond, &r->lock);
			clock_gettime(CLOCK_MONOTONIC, &next);
			continue;
		}
		r->walking = true;
		r->walked = r->activations;
		pthread_cond_broadcast(&r->cond);
		pthread_mutex_unlock(&r->lock);
		walk(r, r->root);
		pthread_mutex_lock(&r->lock);
		r->walking = false;
		r->walks++;
		pthread_cond_broadcast(&r->cond);
		/* The next walk starts one interval after this one started. */
		uint64_t at = to_ns(&next) + r->interval_ns;

		clock_gettime(CLOCK_MONOTONIC, &now);
		if (at < to_ns(&now))
			at = to_ns(&now);
		next.tv_sec = (time_t)(at / 1000000000u);
		next.tv_nsec = (long)(at % 1000000000u);
		/* A new activation (paused and started again) walks at once. */
		while (r->active && !r->quit && r->walked == r->activations &&
		       pthread_cond_timedwait(&r->cond, &r->lock, &next) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

int bench_tree_reader_start(struct bench_ctx *ctx)
{
	struct bench_tree_reader *r;
	pthread_condattr_t ca;

	if (!ctx->opts.read_tree_hz)
		return 0;
	r = calloc(1, sizeof(*r));
	if (!r || !xdm_mount_point(r->root, sizeof(r->root))) {
		fprintf(stderr, "xdm-bench: --read-tree: no tree is mounted (use --mount)\n");
		free(r);
		return BENCH_EXIT_USAGE;
	}
	r->interval_ns = 1000000000u / ctx->opts.read_tree_hz;
	pthread_mutex_init(&r->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&r->thread, NULL, reader_main, r)) {
		fprintf(stderr, "xdm-bench: --read-tree: cannot start the reader thread\n");
		pthread_cond_destroy(&r->cond);
		pthread_mutex_destroy(&r->lock);
		free(r);
		return BENCH_EXIT_FAIL;
	}
	ctx->reader = r;
	return 0;
}

void bench_tree_reader_set(struct bench_ctx *ctx, bool active)
{
	struct bench_tree_reader *r = ctx->reader;
	struct timespec now;

	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	if (active && !r->active) {
		r->activations++;
		r->active = true;
		pthread_cond_broadcast(&r->cond);
		while (r->walked != r->activations)
			pthread_cond_wait(&r->cond, &r->lock);
		clock_gettime(CLOCK_MONOTONIC, &now);
		r->since_ns = to_ns(&now);
	} else if (!active && r->active) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		r->active_ns += to_ns(&now) - r->since_ns;
		r->active = false;
		pthread_cond_broadcast(&r->cond);
		while (r->walking)
			pthread_cond_wait(&r->cond, &r->lock);
	}
	pthread_mutex_unlock(&r->lock);
}

void bench_tree_reader_stop(struct bench_ctx *ctx)
{
	struct bench_tree_reader *r = ctx->reader;
	double secs;

	if (!r)
		return;
	bench_tree_reader_set(ctx, false);
	pthread_mutex_lock(&r->lock);
	r->quit = true;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->thread, NULL);
	secs = (double)r->active_ns / 1e9;
	fprintf(stderr, "xdm-bench: tree reader: %llu walks in %.2f s of xdm+tree runs "
		"(%.1f a second, asked %u), %.1f files a walk, %llu errors\n",
		(unsigned long long)r->walks, secs, secs > 0 ? (double)r->walks / secs : 0.0,
		ctx->opts.read_tree_hz, r->walks ? (double)r->files / (double)r->walks : 0.0,
		(unsigned long long)r->errors);
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
	free(r);
	ctx->reader = NULL;
}
