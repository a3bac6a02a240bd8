/* SPDX-License-Identifier: MIT */
/*
 * fuzz_tree_store.c - the writable files of the introspection tree, through
 * xdm_tree_store(), the call behind `echo V > /mnt/xdm/0/...`.
 *
 * One runtime is built at start-up, on the host platform, with a layer of
 * each module that has a writable file:
 *
 *   example label=fuzz | budget key=fuzz-<pid> limit=1M | logging sink=memory
 *   | pool max=64M | host
 *
 * (the budget's key is this process's own, so no other process's budget is
 * touched).  Each input is written, as is, to every writable file, and the
 * sysfs rule is checked (doc/design.md, "The sysfs rules"): a refused
 * store is -EINVAL and changes nothing that can be read back; an accepted
 * one reads back as a value of its file's kind, the value written.  After
 * an accepted store the old value is written back, so that every input
 * starts from the same state and a crash reproduces from its input alone.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <unistd.h>

#include <xdm/xdm.h>

#include "tests/fuzz/fuzz.h"

enum kind {
	KIND_SIZE,		/* a size: the value is what xdm_parse_size() makes of it */
	KIND_LABEL,		/* the example's label: the text, one newline dropped */
	KIND_PEAK,		/* reserved_peak: takes "0", then reads as reserved */
	KIND_ACTION,		/* write-only: nothing to read back */
};

static const struct {
	const char *path;
	enum kind kind;
} files[] = {
	{ "0/layers/0-example/label", KIND_LABEL },
	{ "0/budget/limit", KIND_SIZE },
	{ "0/layers/1-budget/limit", KIND_SIZE },
	{ "0/pool/max", KIND_SIZE },
	{ "0/pool/reserved_peak", KIND_PEAK },
	{ "0/pool/trim", KIND_ACTION },
	{ "0/layers/2-logging/flush", KIND_ACTION },
};

#define NFILES (sizeof(files) / sizeof(files[0]))

static struct xdm_runtime *rt;
static uint64_t memory_total;

/* The text of a file; a file of this runtime that cannot be shown is a bug. */
static char *show(const char *path)
{
	char *text = NULL;
	size_t len = 0;
	int err = xdm_tree_show(path, &text, &len);

	FUZZ_ASSERT(err == 0 && text && strlen(text) == len, "show %s: %d", path, err);
	return text;
}

static uint64_t show_u64(const char *path)
{
	char *text = show(path), *end;
	uint64_t v = strtoull(text, &end, 10);

	FUZZ_ASSERT(end != text && strcmp(end, "\n") == 0, "%s reads '%s'", path, text);
	free(text);
	return v;
}

/* Every readable writable file, in the order of files[]. */
struct snapshot {
	char *text[NFILES];
};

static void take(struct snapshot *s)
{
	for (size_t i = 0; i < NFILES; i++)
		s->text[i] = files[i].kind == KIND_ACTION ? NULL : show(files[i].path);
}

static void drop(struct snapshot *s)
{
	for (size_t i = 0; i < NFILES; i++)
		free(s->text[i]);
}

/* Nothing readable changed since before: else abort, naming what did. */
static void unchanged(const struct snapshot *before, const char *what)
{
	struct snapshot now;

	take(&now);
	for (size_t i = 0; i < NFILES; i++)
		FUZZ_ASSERT(!before->text[i] || strcmp(before->text[i], now.text[i]) == 0,
			    "%s changed %s from '%s' to '%s'", what, files[i].path,
			    before->text[i], now.text[i]);
	drop(&now);
}

static void destroy_runtime(void)
{
	/* Unlinks the budget's segment in /dev/shm. */
	if (rt)
		xdm_runtime_destroy(rt);
	rt = NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char stack[256];
	enum xdm_status st;

	/* This build tree's modules and its test config, never the machine's. */
	if (!getenv("XDM_MODULE_PATH"))
		setenv("XDM_MODULE_PATH", XDM_FUZZ_MODULE_PATH, 1);
	setenv("XDM_CONFIG", XDM_FUZZ_CONFIG, 1);
	unsetenv("XDM_MOUNT");
	snprintf(stack, sizeof(stack),
		 "example label=fuzz | budget key=fuzz-%ld limit=1M | logging sink=memory | "
		 "pool max=64M | host", (long)getpid());
	st = xdm_runtime_create(0, "host", stack, &rt);
	FUZZ_ASSERT(st == XDM_OK, "runtime '%s': %s", stack, xdm_last_error_message());
	FUZZ_ASSERT(strcmp(xdm_runtime_name(rt), "0") == 0, "runtime named '%s'",
		    xdm_runtime_name(rt));
	atexit(destroy_runtime);
	memory_total = show_u64("0/memory_total");
	return 0;
}

/* An accepted store to file i: check what reads back, then put back the old value. */
static void accepted(size_t i, const char *value, size_t len, const struct snapshot *before)
{
	const char *path = files[i].path;
	uint64_t want, got;
	char *text;
	int err;

	switch (files[i].kind) {
	case KIND_SIZE:
		/* A value has no NUL (the tree refuses one): value is the whole text. */
		FUZZ_ASSERT(xdm_parse_size(value, memory_total, &want) == XDM_OK,
			    "%s took '%s', which is no size", path, value);
		got = show_u64(path);
		FUZZ_ASSERT(got == want, "%s took '%s' as %llu, not %llu", path, value,
			    (unsigned long long)got, (unsigned long long)want);
		/* The budget's two directories are one file. */
		if (strstr(path, "budget/limit"))
			FUZZ_ASSERT(show_u64("0/budget/limit") ==
					    show_u64("0/layers/1-budget/limit"),
				    "the budget's limit differs between its directories");
		break;
	case KIND_LABEL:
		text = show(path);
		if (len && value[len - 1] == '\n')
			len--;
		FUZZ_ASSERT(strlen(text) == len + 1 && !memcmp(text, value, len) &&
			    text[len] == '\n', "%s took '%s' and reads '%s'", path, value, text);
		free(text);
		break;
	case KIND_PEAK:
		FUZZ_ASSERT(show_u64(path) == show_u64("0/pool/reserved"),
			    "%s restarted but is not reserved", path);
		break;
	case KIND_ACTION:
		/* Nothing is allocated: trimming or flushing has nothing to change. */
		unchanged(before, path);
		return;
	}
	for (size_t k = 0; k < NFILES; k++) {
		if (!before->text[k] || files[k].kind == KIND_PEAK)
			continue;
		err = xdm_tree_store(files[k].path, before->text[k], strlen(before->text[k]));
		FUZZ_ASSERT(err == 0, "putting back %s: %d", files[k].path, err);
	}
	unchanged(before, "putting the old values back");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct snapshot before;
	char *value = fuzz_string(data, size);

	if (!value)
		return 0;
	take(&before);
	for (size_t i = 0; i < NFILES; i++) {
		int err = xdm_tree_store(files[i].path, (const char *)data, size);

		if (err) {
			FUZZ_ASSERT(err == -EINVAL, "%s answered %d", files[i].path, err);
			unchanged(&before, "a refused store");
			continue;
		}
		FUZZ_ASSERT(size && !memchr(data, '\0', size), "%s took a value with a NUL",
			    files[i].path);
		accepted(i, value, size, &before);
	}
	drop(&before);
	free(value);
	return 0;
}
