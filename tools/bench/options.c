/* SPDX-License-Identifier: MIT */
/*
 * options.c - the command line of xdm-bench.
 *
 * Every mistake on the command line is one sentence on stderr and exit 2, so
 * that a script can tell "you called me wrong" from "the runtime failed" (1)
 * and "the stack leaked" (3).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum {
	OPT_SIZES = 256,
	OPT_SEED,
	OPT_ANCHORS,
	OPT_MOUNT,
	OPT_HOLD,
	OPT_READ_TREE,
	OPT_STREAMS,
	OPT_REPLAY,
	OPT_COMPARE,
	OPT_DEVICES,
	OPT_NATIVE,
};

static const struct option long_options[] = {
	{ "stack", required_argument, NULL, 's' },
	{ "config", required_argument, NULL, 'c' },
	{ "platform", required_argument, NULL, 'p' },
	{ "device", required_argument, NULL, 'd' },
	{ "devices", required_argument, NULL, OPT_DEVICES },
	{ "workload", required_argument, NULL, 'w' },
	{ "sizes", required_argument, NULL, OPT_SIZES },
	{ "iterations", required_argument, NULL, 'n' },
	{ "threads", required_argument, NULL, 't' },
	{ "repeat", required_argument, NULL, 'r' },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "anchors", required_argument, NULL, OPT_ANCHORS },
	{ "json", no_argument, NULL, 'j' },
	{ "mount", required_argument, NULL, OPT_MOUNT },
	{ "hold", required_argument, NULL, OPT_HOLD },
	{ "read-tree", required_argument, NULL, OPT_READ_TREE },
	{ "streams", required_argument, NULL, OPT_STREAMS },
	{ "replay", required_argument, NULL, OPT_REPLAY },
	{ "compare", required_argument, NULL, OPT_COMPARE },
	{ "native", required_argument, NULL, OPT_NATIVE },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: xdm-bench [OPTION]...\n"
		"Measure allocation throughput and latency of an xdm stack, beside the\n"
		"CUDA driver's own allocators where it runs on a GPU.\n"
		"\n"
		"  -s, --stack SPEC       run a private runtime around SPEC, e.g.\n"
		"                         \"budget limit=1G | host\"\n"
		"  -c, --config FILE      use FILE as the configuration (sets XDM_CONFIG)\n"
		"  -p, --platform SPEC    platform module of the private runtime, with its\n"
		"                         parameters, e.g. \"host devices=2\"\n"
		"  -d, --device N         device ordinal (default 0)\n"
		"      --devices LIST     spread the threads workload over these devices\n"
		"                         (\"0,1\", or all): thread i on the (i mod n)-th,\n"
		"                         each device with its own runtime; threads only\n"
		"  -w, --workload LIST    pair, random, threads, streams, cross, replay, ipc\n"
		"                         or all, or several separated by commas (default\n"
		"                         all: every one but replay and ipc; replay alone\n"
		"                         with --replay; ipc exports blocks of each size to\n"
		"                         a second process, 1000 rounds unless -n)\n"
		"      --sizes LIST       block sizes of pair (default " BENCH_DEFAULT_SIZES ")\n"
		"  -n, --iterations N     pairs per size, random operations, pairs per\n"
		"                         thread, pairs per stream, cross uses, event_edge\n"
		"                         edges (defaults %u, %u, %u, %u, %u, %u);\n"
		"                         replay runs its whole file\n"
		"  -t, --threads LIST     thread counts of threads (default " BENCH_DEFAULT_THREADS ")\n"
		"      --streams N        streams workload: use at most N streams (1 to %u;\n"
		"                         default %u, or fewer where the subject has fewer)\n"
		"      --replay FILE      replay workload: the CSV of a logging adaptor\n"
		"                         (\"logging path=FILE | ...\"), replayed on every\n"
		"                         subject\n"
		"  -r, --repeat R         timed runs per measurement (default %u)\n"
		"      --seed S           seed of the random workload (default 1)\n"
		"      --anchors WHEN     measure cuMemAlloc and cuMemAllocAsync beside xdm\n"
		"                         and print ratios: auto (when the runtime's\n"
		"                         platform is cuda), on or off (default auto)\n"
		"  -j, --json             print one JSON object instead of tables\n"
		"      --mount DIR        serve the runtime's tree at DIR over FUSE (sets\n"
		"                         XDM_MOUNT; see xdm-fs(7))\n"
		"      --hold SECONDS     keep the runtime (and the mount) alive this long\n"
		"                         after the workloads; SIGINT or SIGTERM ends it\n"
		"      --read-tree HZ     with --mount: add the subject xdm+tree, the same\n"
		"                         runtime timed while a thread reads the whole tree\n"
		"                         HZ times a second; ratios xdm+tree / xdm\n"
		"      --native HANDLE    pair through the framework entry (xdm_native_allocate\n"
		"                         and xdm_native_free) on a CUDA handle: null,\n"
		"                         legacy or per-thread\n"
		"      --compare SPEC     add the subject xdm2, a second runtime around\n"
		"                         SPEC on the same device and platform, timed\n"
		"                         interleaved with xdm; ratios and differences\n"
		"                         xdm2 - xdm (e.g. the cost of one more layer)\n"
		"  -h, --help             print this help and exit\n"
		"  -V, --version          print the version and exit\n"
		"\n"
		"Without --stack, --config or --platform the bench uses the process-wide\n"
		"runtime of the device, built from XDM_CONFIG, the system xdm.conf or the\n"
		"embedded default.  Exit status: 0 ok, 1 runtime or allocation failure,\n"
		"2 bad usage, 3 memory still outstanding at the end.  See xdm-bench(1).\n",
		BENCH_DEFAULT_PAIR_ITERS, BENCH_DEFAULT_RANDOM_OPS,
		BENCH_DEFAULT_THREAD_ITERS, BENCH_DEFAULT_STREAMS_ITERS, BENCH_DEFAULT_CROSS_ITERS,
		BENCH_DEFAULT_EDGE_ITERS, XDM_MAX_STREAMS, BENCH_DEFAULT_STREAMS,
		BENCH_DEFAULT_REPEAT);
}

/* A whole decimal number in [min, max]; strtoull alone takes "-1" and " 7". */
static int parse_u64(const char *opt, const char *text, uint64_t min, uint64_t max,
		     uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (text[0] < '0' || text[0] > '9')
		goto bad;
	errno = 0;
	v = strtoull(text, &end, 10);
	if (errno || *end != '\0' || v < min || v > max)
		goto bad;
	*out = v;
	return 0;
bad:
	fprintf(stderr, "xdm-bench: %s: '%s' is not a whole number from %" PRIu64
		" to %" PRIu64 ".\n", opt, text, min, max);
	return -1;
}

/*
 * --native: the CUDA handles a framework passes, by name.  Their values are
 * the driver's (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD), written out
 * so that the bench needs no CUDA header to take them.
 */
static int parse_native(const char *text, struct bench_opts *o)
{
	static const struct { const char *name; uintptr_t handle; } names[] = {
		{ "null", 0x0 }, { "legacy", 0x1 }, { "per-thread", 0x2 },
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(text, names[i].name) == 0) {
			o->native_name = names[i].name;
			o->native = (void *)names[i].handle;
			return 0;
		}
	fprintf(stderr, "xdm-bench: --native: '%s' is not one of null, legacy, per-thread.\n",
		text);
	return -1;
}

/* One name of --workload: its bits, or 0. */
static unsigned int workload_bits(const char *name, size_t len)
{
	static const struct {
		const char *name;
		unsigned int bits;
	} names[] = {
		{ "pair", BENCH_W_PAIR },
		{ "random", BENCH_W_RANDOM },
		{ "threads", BENCH_W_THREADS },
		{ "streams", BENCH_W_STREAMS },
		{ "cross", BENCH_W_CROSS },
		{ "replay", BENCH_W_REPLAY },
		{ "ipc", BENCH_W_IPC },
		{ "all", BENCH_W_ALL },
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i].name) == len && memcmp(name, names[i].name, len) == 0)
			return names[i].bits;
	return 0;
}

/*
 * "random" or "random,replay": the workloads always run in the one order
 * (pair, random, threads, streams, cross, replay), whatever order the list
 * names them in.
 */
static int parse_workload(const char *text, struct bench_opts *o)
{
	unsigned int bits = 0;
	const char *p = text;

	for (;;) {
		size_t len = strcspn(p, ",");
		unsigned int b = workload_bits(p, len);

		if (!b) {
			fprintf(stderr, "xdm-bench: --workload: '%.*s' is not one of pair, random, threads, streams, cross, replay, ipc, all.\n",
				(int)len, p);
			return -1;
		}
		bits |= b;
		if (p[len] == '\0')
			break;
		p += len + 1;
	}
	o->workloads = bits;
	o->workload_name = text;
	o->workload_set = true;
	return 0;
}

static const char *const anchors_names[] = {
	[BENCH_ANCHORS_AUTO] = "auto",
	[BENCH_ANCHORS_ON] = "on",
	[BENCH_ANCHORS_OFF] = "off",
};

const char *bench_anchors_name(enum bench_anchors_mode m)
{
	return anchors_names[m];
}

static int parse_anchors(const char *text, struct bench_opts *o)
{
	for (size_t i = 0; i < sizeof(anchors_names) / sizeof(anchors_names[0]); i++) {
		if (strcmp(text, anchors_names[i]) == 0) {
			o->anchors = (enum bench_anchors_mode)i;
			return 0;
		}
	}
	fprintf(stderr, "xdm-bench: --anchors: '%s' is not one of auto, on, off.\n", text);
	return -1;
}

void bench_opts_init(struct bench_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->workloads = BENCH_W_ALL;
	o->workload_name = "all";
	o->sizes_text = BENCH_DEFAULT_SIZES;
	o->threads_text = BENCH_DEFAULT_THREADS;
	o->repeat = BENCH_DEFAULT_REPEAT;
	o->seed = 1;
	o->anchors = BENCH_ANCHORS_AUTO;
}

static int handle_option(int c, const char *arg, struct bench_opts *o)
{
	uint64_t v;

	switch (c) {
	case 's':
		o->stack = arg;
		return 0;
	case 'c':
		o->config = arg;
		return 0;
	case 'p':
		o->platform = arg;
		return 0;
	case 'd':
		if (parse_u64("--device", arg, 0, XDM_MAX_DEVICES - 1, &v))
			return -1;
		o->ordinal = (uint32_t)v;
		o->device_set = true;
		return 0;
	case OPT_DEVICES:
		o->devices_text = arg;
		return 0;
	case 'w':
		return parse_workload(arg, o);
	case OPT_NATIVE:
		return parse_native(arg, o);
	case OPT_SIZES:
		o->sizes_text = arg;
		return 0;
	case 'n':
		if (parse_u64("--iterations", arg, 1, UINT64_C(1) << 40, &v))
			return -1;
		o->iterations = v;
		o->iterations_set = true;
		return 0;
	case 't':
		o->threads_text = arg;
		return 0;
	case 'r':
		if (parse_u64("--repeat", arg, 1, BENCH_MAX_REPEAT, &v))
			return -1;
		o->repeat = (unsigned int)v;
		return 0;
	case OPT_SEED:
		return parse_u64("--seed", arg, 0, UINT64_MAX, &o->seed);
	case OPT_ANCHORS:
		return parse_anchors(arg, o);
	case 'j':
		o->json = true;
		return 0;
	case OPT_MOUNT:
		if (!arg[0]) {
			fprintf(stderr, "xdm-bench: --mount: the directory is empty.\n");
			return -1;
		}
		o->mount = arg;
		return 0;
	case OPT_HOLD:
		return parse_u64("--hold", arg, 0, UINT64_C(1) << 32, &o->hold_seconds);
	case OPT_READ_TREE:
		if (parse_u64("--read-tree", arg, 1, 1000, &v))
			return -1;
		o->read_tree_hz = (unsigned int)v;
		return 0;
	case OPT_STREAMS:
		if (parse_u64("--streams", arg, 1, XDM_MAX_STREAMS, &v))
			return -1;
		o->streams = (unsigned int)v;
		o->streams_set = true;
		return 0;
	case OPT_REPLAY:
		if (!arg[0]) {
			fprintf(stderr, "xdm-bench: --replay: the file name is empty.\n");
			return -1;
		}
		o->replay = arg;
		return 0;
	case OPT_COMPARE:
		if (!arg[0]) {
			fprintf(stderr, "xdm-bench: --compare: the stack is empty.\n");
			return -1;
		}
		o->compare = arg;
		return 0;
	}
	return -1;
}

static int parse_list(const char *opt, const char *text, size_t *count,
		      int (*item)(const char *opt, const char *text, struct bench_opts *o, size_t i),
		      struct bench_opts *o);

/* One ordinal of --devices; a device named twice would get two runtimes. */
static int device_item(const char *opt, const char *text, struct bench_opts *o, size_t i)
{
	uint64_t v;

	if (parse_u64(opt, text, 0, XDM_MAX_DEVICES - 1, &v))
		return -1;
	for (size_t j = 0; j < i; j++) {
		if (o->devices[j] == v) {
			fprintf(stderr, "xdm-bench: %s: device %llu is listed twice.\n", opt,
				(unsigned long long)v);
			return -1;
		}
	}
	o->devices[i] = (uint32_t)v;
	return 0;
}

/*
 * --devices: "all" or a list of ordinals.  Only the threads workload knows
 * how to spread itself over devices, so it is the default here, and any
 * other workload is refused rather than run on one device of the list
 * unasked.  The first device is the one the header and the JSON "device"
 * describe.
 */
static int parse_devices(struct bench_opts *o)
{
	unsigned int other;

	if (o->device_set) {
		fprintf(stderr, "xdm-bench: --device and --devices exclude each other: --device runs every workload on one device, --devices spreads the threads workload over several.\n");
		return -1;
	}
	if (strcmp(o->devices_text, "all") == 0)
		o->devices_all = true;
	else if (parse_list("--devices", o->devices_text, &o->ndevices, device_item, o))
		return -1;
	else
		o->ordinal = o->devices[0];
	if (!o->workload_set && !o->replay) {
		o->workloads = BENCH_W_THREADS;
		o->workload_name = "threads";
	}
	other = o->workloads & ~(unsigned int)BENCH_W_THREADS;
	if (other) {
		fprintf(stderr, "xdm-bench: --devices spreads only the threads workload over devices, and %s runs on one device: run it with --device N, one device at a time.\n",
			bench_workload_name((enum bench_workload)(other & -other)));
		return -1;
	}
	return 0;
}

/*
 * Parses argv into o.  Returns BENCH_CONTINUE, or the exit code for --help,
 * --version and mistakes.  Lists are only stored here: their sizes go
 * through libxdm, which must not be called before XDM_CONFIG is set.
 */
int bench_parse_args(int argc, char **argv, struct bench_opts *o)
{
	int c;

	opterr = 0;	/* our own sentences, not getopt's */
	while ((c = getopt_long(argc, argv, ":s:c:p:d:w:n:t:r:jhV", long_options, NULL)) != -1) {
		switch (c) {
		case 'h':
			usage(stdout);
			return BENCH_EXIT_OK;
		case 'V':
			printf("xdm-bench (xdm) %s\n", PACKAGE_VERSION);
			return BENCH_EXIT_OK;
		case ':':
			fprintf(stderr, "xdm-bench: option '%s' needs a value; see xdm-bench --help.\n",
				argv[optind - 1]);
			return BENCH_EXIT_USAGE;
		case '?':
			if (optopt)
				fprintf(stderr, "xdm-bench: unknown option '-%c'; see xdm-bench --help.\n",
					optopt);
			else
				fprintf(stderr, "xdm-bench: unknown option '%s'; see xdm-bench --help.\n",
					argv[optind - 1]);
			return BENCH_EXIT_USAGE;
		default:
			if (handle_option(c, optarg, o))
				return BENCH_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "xdm-bench: unexpected argument '%s'; options only, see xdm-bench --help.\n",
			argv[optind]);
		return BENCH_EXIT_USAGE;
	}
	if (o->read_tree_hz && !o->mount) {
		fprintf(stderr, "xdm-bench: --read-tree needs --mount: it reads the mounted tree.\n");
		return BENCH_EXIT_USAGE;
	}
	if (o->stack && o->config) {
		fprintf(stderr, "xdm-bench: --stack and --config exclude each other: a stack spec replaces the configured stack.\n");
		return BENCH_EXIT_USAGE;
	}
	/* A file to replay and no workload named: the file is what was asked for. */
	if (o->replay && !o->workload_set) {
		o->workloads = BENCH_W_REPLAY;
		o->workload_name = "replay";
	}
	if ((o->workloads & BENCH_W_REPLAY) && !o->replay) {
		fprintf(stderr, "xdm-bench: --workload replay needs --replay FILE, the log to replay.\n");
		return BENCH_EXIT_USAGE;
	}
	if (o->replay && !(o->workloads & BENCH_W_REPLAY)) {
		fprintf(stderr, "xdm-bench: --replay %s: only the replay workload reads it; add replay to --workload.\n",
			o->replay);
		return BENCH_EXIT_USAGE;
	}
	if (o->devices_text && parse_devices(o))
		return BENCH_EXIT_USAGE;
	if (o->native_name && o->workloads != BENCH_W_PAIR) {
		fprintf(stderr, "xdm-bench: --native %s measures the pair workload only: give -w pair.\n",
			o->native_name);
		return BENCH_EXIT_USAGE;
	}
	return BENCH_CONTINUE;
}

/*
 * Splits a comma-separated list; item(text, index) parses one entry.  An
 * empty entry ("4K,,1M") is a mistake, not something to skip silently.
 */
static int parse_list(const char *opt, const char *text, size_t *count,
		      int (*item)(const char *opt, const char *text, struct bench_opts *o, size_t i),
		      struct bench_opts *o)
{
	char buf[1024];
	char *p, *comma;
	size_t n = 0;

	if (strlen(text) >= sizeof(buf)) {
		fprintf(stderr, "xdm-bench: %s: the list is longer than %zu characters.\n", opt,
			sizeof(buf) - 1);
		return -1;
	}
	strcpy(buf, text);
	for (p = buf;; p = comma + 1) {
		comma = strchr(p, ',');
		if (comma)
			*comma = '\0';
		if (*p == '\0') {
			fprintf(stderr, "xdm-bench: %s: '%s' has an empty entry.\n", opt, text);
			return -1;
		}
		if (n == BENCH_MAX_LIST) {
			fprintf(stderr, "xdm-bench: %s: more than %d entries.\n", opt, BENCH_MAX_LIST);
			return -1;
		}
		if (item(opt, p, o, n))
			return -1;
		n++;
		if (!comma)
			break;
	}
	*count = n;
	return 0;
}

static int size_item(const char *opt, const char *text, struct bench_opts *o, size_t i)
{
	uint64_t v;

	/* No percent base: "% of the device" means nothing for one block. */
	if (xdm_parse_size(text, 0, &v) != XDM_OK || v == 0 || v > SIZE_MAX) {
		fprintf(stderr, "xdm-bench: %s: '%s' is not a block size (examples: 256, 4K, 1.5M, 2G).\n",
			opt, text);
		return -1;
	}
	o->sizes[i] = v;
	return 0;
}

static int threads_item(const char *opt, const char *text, struct bench_opts *o, size_t i)
{
	uint64_t v;

	if (parse_u64(opt, text, 1, BENCH_MAX_THREADS, &v))
		return -1;
	o->threads[i] = (unsigned int)v;
	return 0;
}

/* The second half of parsing, after XDM_CONFIG is in place.  0 or -1. */
int bench_parse_lists(struct bench_opts *o)
{
	if (parse_list("--sizes", o->sizes_text, &o->nsizes, size_item, o))
		return -1;
	return parse_list("--threads", o->threads_text, &o->nthreads, threads_item, o);
}
