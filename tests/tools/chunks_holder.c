/* SPDX-License-Identifier: MIT */
/*
 * chunks_holder.c - a process whose tree xdmctl snapshot --pid reads
 * (tests/tools/xdmctl_snapshot_live.sh): two runtimes of ordinal 0, one
 * over STACK (a pool, so that its chunks have free pieces beside the
 * blocks) and one over plain host memory (a chunk per block), some blocks
 * freed, the tree mounted at MOUNT.
 *
 *	chunks_holder STACK MOUNT
 *
 * It prints a line per block, "live PTR BYTES STREAM RUNTIME" or "freed PTR
 * BYTES STREAM RUNTIME" (PTR in hex, RUNTIME its tree directory), then
 * "ready", and holds everything until its standard input ends; then it
 * frees what it holds, unmounts and exits 0.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <xdm/xdm.h>

/* Sizes from a size class to a chunk of its own; every third is freed. */
static const size_t sizes[] = { 300, 4096, 70000, 100000, 700000, 3 << 20, 512, 200000 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static int fail(const char *what)
{
	fprintf(stderr, "chunks_holder: %s: %s\n", what, xdm_last_error_message());
	return 1;
}

static void say(const char *what, const struct xdm_block *b, struct xdm_runtime *rt)
{
	printf("%s 0x%" PRIx64 " %zu %u %s\n", what, b->ptr, b->bytes, b->stream,
	       xdm_runtime_name(rt));
}

int main(int argc, char **argv)
{
	struct xdm_runtime *pool = NULL, *plain = NULL;
	struct xdm_block b[NSIZES], alone;
	int c;

	if (argc != 3) {
		fprintf(stderr, "usage: chunks_holder STACK MOUNT\n");
		return 2;
	}
	if (xdm_runtime_create(0, "host", argv[1], &pool) != XDM_OK)
		return fail(argv[1]);
	if (xdm_runtime_create(0, "host", "host", &plain) != XDM_OK)
		return fail("host");
	for (size_t i = 0; i < NSIZES; i++)
		if (xdm_allocate(pool, sizes[i], (xdm_stream_id)(i % 2), "held", &b[i]) != XDM_OK)
			return fail("allocate");
	if (xdm_allocate(plain, 5000, 3, "alone", &alone) != XDM_OK)
		return fail("allocate");
	/* Freed after every allocation, so that no live block takes their place. */
	for (size_t i = 0; i < NSIZES; i++) {
		say(i % 3 == 2 ? "freed" : "live", &b[i], pool);
		if (i % 3 == 2 && xdm_deallocate(pool, &b[i]) != XDM_OK)
			return fail("deallocate");
	}
	say("live", &alone, plain);
	if (xdm_mount(argv[2]) != XDM_OK)
		return fail(argv[2]);
	printf("ready\n");
	fflush(stdout);
	while ((c = getchar()) != EOF)
		;
	for (size_t i = 0; i < NSIZES; i++)
		if (i % 3 != 2 && xdm_deallocate(pool, &b[i]) != XDM_OK)
			return fail("deallocate");
	if (xdm_deallocate(plain, &alone) != XDM_OK)
		return fail("deallocate");
	xdm_unmount();
	if (xdm_runtime_destroy(plain) != XDM_OK || xdm_runtime_destroy(pool) != XDM_OK)
		return fail("destroy");
	return 0;
}
