/* SPDX-License-Identifier: MIT */
/*
 * bench.h - shared declarations of xdm-bench.
 *
 * The bench measures "subjects": anything that can allocate and free memory
 * on a stream.  The xdm runtime is always subjects[0]; the CUDA driver's own
 * allocators (cuMemAlloc, cuMemAllocAsync) may follow as "anchors",
 * measured in the same run so that a ratio compares like with like.
 * Workloads only ever see the small ops table below and loop over the
 * subject list themselves, so a new subject needs no change to any
 * workload or to the output.
 *
 * main() owns the one struct bench_ctx; nothing here keeps global state.
 */
#ifndef XDM_TOOLS_BENCH_H
#define XDM_TOOLS_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <xdm/xdm.h>

enum bench_exit {
	BENCH_EXIT_OK = 0,
	BENCH_EXIT_FAIL = 1,	/* the runtime, an allocation or the host failed */
	BENCH_EXIT_USAGE = 2,	/* a bad command line */
	BENCH_EXIT_LEAK = 3,	/* memory still outstanding at the end */
};

/* bench_parse_args() result meaning "carry on", unlike every exit code. */
#define BENCH_CONTINUE (-1)

/* In the order they run.  replay is not in all: it needs a file (--replay). */
enum bench_workload {
	BENCH_W_PAIR = 1u << 0,
	BENCH_W_RANDOM = 1u << 1,
	BENCH_W_THREADS = 1u << 2,
	BENCH_W_STREAMS = 1u << 3,
	BENCH_W_CROSS = 1u << 4,
	BENCH_W_REPLAY = 1u << 5,
	/* Not in all: it starts a second process (ipc.c). */
	BENCH_W_IPC = 1u << 6,
	BENCH_W_ALL = BENCH_W_PAIR | BENCH_W_RANDOM | BENCH_W_THREADS | BENCH_W_STREAMS |
		      BENCH_W_CROSS,
};

#define BENCH_MAX_SUBJECTS 8
#define BENCH_MAX_LIST 64		/* entries of --sizes and --threads */
#define BENCH_MAX_THREADS 1024
#define BENCH_MAX_REPEAT 1000
#define BENCH_NAME_LEN 32
#define BENCH_ERR_LEN 640

/* Defaults of the workloads, also quoted by --help and the man page. */
#define BENCH_DEFAULT_SIZES "256,4K,64K,1M,16M"
#define BENCH_DEFAULT_THREADS "1,4,16"
#define BENCH_DEFAULT_PAIR_ITERS 100000u
#define BENCH_DEFAULT_RANDOM_OPS 200000u
#define BENCH_DEFAULT_THREAD_ITERS 100000u
#define BENCH_DEFAULT_REPEAT 5u
#define BENCH_DEFAULT_EDGE_ITERS 100000u
#define BENCH_RANDOM_MAX_LIVE 1000u
#define BENCH_RANDOM_MIN_BYTES 256u
#define BENCH_RANDOM_MAX_BYTES (4u << 20)
#define BENCH_THREAD_BYTES 4096u
#define BENCH_DEFAULT_STREAMS_ITERS 10000u	/* pairs per stream */
#define BENCH_DEFAULT_STREAMS 16u		/* the runtime's default stream count */
#define BENCH_STREAMS_BYTES (64u << 10)
#define BENCH_DEFAULT_CROSS_ITERS 100000u
#define BENCH_CROSS_BYTES 4096u

/* --anchors: whether the driver's allocators are measured beside xdm. */
enum bench_anchors_mode {
	BENCH_ANCHORS_AUTO,	/* when the xdm runtime runs on the cuda platform */
	BENCH_ANCHORS_ON,	/* always; no driver is exit 1 */
	BENCH_ANCHORS_OFF,
};

struct bench_opts {
	const char *stack;		/* --stack, or NULL */
	const char *config;		/* --config, or NULL */
	const char *platform;		/* --platform SPEC ("host devices=2"), or NULL */
	/*
	 * --native: the pair workload goes through the framework entry
	 * (xdm_native_allocate / xdm_native_free) on this native handle.
	 */
	const char *native_name;	/* "null", "legacy" or "per-thread"; NULL: off */
	void *native;
	uint32_t ordinal;		/* --device; with --devices, the first device */
	bool device_set;		/* --device was given */
	/*
	 * --devices: the threads workload spreads its threads over these
	 * ordinals.  "all" leaves ndevices 0 until the devices are found
	 * (bench_devices_open).  Neither: the bench runs on one device.
	 */
	const char *devices_text;	/* as given, or NULL */
	bool devices_all;
	uint32_t devices[XDM_MAX_DEVICES];
	size_t ndevices;
	unsigned int workloads;		/* enum bench_workload bits */
	const char *workload_name;	/* as given, for the JSON echo */
	bool workload_set;		/* --workload was given */
	const char *sizes_text;		/* parsed late: see bench_parse_lists() */
	const char *threads_text;
	uint64_t sizes[BENCH_MAX_LIST];
	size_t nsizes;
	unsigned int threads[BENCH_MAX_LIST];
	size_t nthreads;
	uint64_t iterations;		/* meaningful when iterations_set */
	bool iterations_set;
	unsigned int repeat;
	uint64_t seed;
	enum bench_anchors_mode anchors;
	bool json;
	const char *mount;		/* --mount, or NULL */
	uint64_t hold_seconds;		/* --hold */
	unsigned int read_tree_hz;	/* --read-tree; 0: no xdm+tree subject */
	unsigned int streams;		/* --streams: most streams of the streams workload */
	bool streams_set;
	const char *replay;		/* --replay FILE, or NULL */
	const char *compare;		/* --compare SPEC: a second runtime, or NULL */
};

/* Counters a subject keeps about itself, read after its frees settled. */
struct bench_counters {
	uint64_t bytes_outstanding;
	uint64_t blocks_outstanding;
	uint64_t bytes_peak;
	uint64_t allocs;
	uint64_t frees;
	uint64_t failures;
	uint64_t stack_bytes_outstanding;	/* xdm_bytes_outstanding() */
};

struct bench_subject;

/* --mount: ask for the tree before the runtime is built (hold.c). */
int bench_mount_request(const struct bench_opts *o);
/* --mount: after the runtime is built, fail unless the tree is there. */
int bench_mount_check(const struct bench_opts *o);
/* --hold: keep the runtime and its mount for a while; SIGINT/SIGTERM end it. */
void bench_hold(const struct bench_opts *o);

/* --read-tree (tree_reader.c): start the reader, paused. */
struct bench_ctx;
struct bench_tree_reader;
int bench_tree_reader_start(struct bench_ctx *ctx);
/* Read the tree from now on, or stop reading once the walk in progress ends. */
void bench_tree_reader_set(struct bench_ctx *ctx, bool active);
/* Stop the reader and say on stderr how often it really read. */
void bench_tree_reader_stop(struct bench_ctx *ctx);

/*
 * What a subject can do.  Blocks travel as struct xdm_block because it is
 * the public description of one allocation; a subject that is not an xdm
 * runtime fills ptr, bytes and stream and may use the rest as it likes.
 * Every call of a workload's timed loop goes through this table, so the
 * cost of the indirect call is paid alike by every subject.
 */
struct bench_subject_ops {
	/* 0 on success; -1 with the reason left for strerror(). */
	int (*allocate)(struct bench_subject *s, size_t bytes, uint32_t stream,
			struct xdm_block *out);
	int (*deallocate)(struct bench_subject *s, struct xdm_block *blk);
	uint32_t (*stream_count)(struct bench_subject *s);
	/* Wait for every queued free and reclaim it; never inside a timing. */
	int (*settle)(struct bench_subject *s);
	/* false: this subject keeps no counters. */
	bool (*counters)(struct bench_subject *s, struct bench_counters *out);
	/* The calling thread's reason for its last failure, as a sentence. */
	void (*strerror)(struct bench_subject *s, char *buf, size_t len);
	void (*destroy)(struct bench_subject *s);

	/*
	 * The rest is optional: a subject leaves NULL what it cannot do, and
	 * the workload that needs it skips the subject with a note.
	 */

	/*
	 * Before workload w, outside any timing: get what it needs (a driver
	 * handle, the streams' native handles) and check that the subject can
	 * run it.  0, or -1 with why not (a skip, not a failure).  NULL: ready
	 * for every workload whose ops it has.
	 */
	int (*ready)(struct bench_subject *s, enum bench_workload w, char *why, size_t len);
	/*
	 * streams: queue work on stream that writes into blk (a memset on a
	 * GPU, a host function on the host platform), so that the free which
	 * follows finds the block held by queued work, as a real kernel would
	 * hold it.  0, or -1 with the reason in why.
	 */
	int (*touch)(struct bench_subject *s, const struct xdm_block *blk, uint32_t stream,
		     char *why, size_t len);
	/*
	 * cross: one read-write use of blk on stream, declared the xdm way
	 * (xdm_prepare_block_use, then xdm_finish_block_use).  0, or -1 with
	 * *call naming the call that failed and the reason left for strerror().
	 */
	int (*cross_use)(struct bench_subject *s, const struct xdm_block *blk, uint32_t stream,
			 const char **call);
	/*
	 * The fragmentation figure of random and replay: restart the peak of
	 * the bytes the subject holds from below (its pool's reservation)
	 * from what it holds now, after giving back what it can.  false: the
	 * subject has no such figure, or a warning was said.
	 */
	bool (*reserved_reset)(struct bench_subject *s);
	/* The peak since reserved_reset(); false as above. */
	bool (*reserved_peak)(struct bench_subject *s, uint64_t *bytes);
	/* ipc: the xdm runtime behind the subject, whose blocks it exports. */
	struct xdm_runtime *(*runtime)(struct bench_subject *s);
};

struct bench_subject {
	const struct bench_subject_ops *ops;
	char name[BENCH_NAME_LEN];	/* the table's "subject" column */
	char desc[512];			/* e.g. the stack spec */
	void *priv;
	bool anchor;			/* a driver allocator, the divisor of ratios */
	bool reads_tree;		/* xdm+tree: its runs are timed while the tree is read */
	bool borrowed;			/* shares another subject's priv: not destroyed */
	bool compared;			/* --compare's runtime: its rows are also divided by xdm's */
	struct bench_counters last;	/* the latest counters read */
	bool has_last;
	/*
	 * --devices: the subject is a group, the same subject once per listed
	 * device (parts[d] on the d-th), named "xdm@1" and so on.  Only the
	 * threads workload runs on a group, calling its parts; settling,
	 * counting, the leak check and destroying go part by part (see
	 * bench_nparts and bench_part).  NULL and 0 for a plain subject.
	 */
	struct bench_subject *parts;
	size_t nparts;
};

/* How many subjects s stands for: its parts, or itself. */
static inline size_t bench_nparts(const struct bench_subject *s)
{
	return s->nparts ? s->nparts : 1;
}

/* The i-th of them (i < bench_nparts(s)). */
static inline struct bench_subject *bench_part(struct bench_subject *s, size_t i)
{
	return s->nparts ? &s->parts[i] : s;
}

/*
 * --devices: one device's part of a threads row.  Thread i runs on the
 * (i mod n)-th device, so the device's threads and pairs are fixed by the
 * thread count; its time is measured: from the first of its threads to
 * start to the last to end, in each run.
 */
struct bench_share {
	uint32_t ordinal;		/* named "<row's subject>@<ordinal>" */
	unsigned int threads;		/* may be 0: fewer threads than devices */
	uint64_t ops;			/* pairs of one timed run on this device */
	double median_ns;		/* its span over the pairs of one thread */
	double min_ns;
	double ops_per_s;		/* its pairs over its median span */
};

/* One row of the results table. */
struct bench_result {
	const struct bench_subject *subject;
	enum bench_workload workload;
	char param[48];			/* "4K", "4 threads", "256-4M" */
	uint64_t bytes;			/* block size; 0 where sizes vary */
	unsigned int threads;
	uint64_t ops;			/* operations in one timed run */
	uint64_t ops_requested;		/* differs from ops when scaled down */
	unsigned int runs;
	double median_ns;		/* per op (threads: per pair per thread) */
	double min_ns;
	double ops_per_s;		/* threads: all threads together */
	uint64_t peak_live_bytes;	/* random, replay: usable bytes the runs saw */
	uint64_t peak_live_blocks;	/* random, replay */
	uint64_t peak_asked_bytes;	/* random, replay: requested, from the script */
	bool has_reserved;		/* random, replay: peak_reserved_bytes is known */
	uint64_t peak_reserved_bytes;
	uint32_t streams;		/* streams: how many were used */
	/* threads on a group (--devices): one share per device, in list order;
	 * bench_report_result keeps its own copy. */
	const struct bench_share *shares;
	size_t nshares;
};

/* A subject that did not run a workload, and why (bench_report_skip). */
struct bench_skip {
	const struct bench_subject *subject;
	enum bench_workload workload;
	char why[256];
};

/* What the replay workload read from --replay FILE (replay_csv.c). */
struct bench_replay_step {
	uint64_t bytes;			/* allocate: logged bytes; 0: free */
	uint32_t stream;		/* allocate: the logged stream */
	uint32_t slot;			/* the block's index in the live array */
};

struct bench_replay {
	const char *path;
	char name[48];			/* the file's last component, the param column */
	struct bench_replay_step *steps;
	size_t nsteps;
	size_t nslots;			/* most blocks live at once */
	uint64_t left_live;		/* blocks the log never freed */
	uint64_t rows;			/* rows of the file, header not counted */
	uint64_t allocs, frees;		/* replayed */
	uint64_t failures_skipped;	/* allocate_failure rows: nothing to replay */
	uint64_t threads;		/* distinct logged threads */
	uint64_t peak_bytes;		/* as logged, so as the replay asks */
	uint64_t peak_blocks;
};

/* Counters of one subject after one workload. */
struct bench_counter_row {
	const struct bench_subject *subject;
	enum bench_workload after;
	bool valid;
	struct bench_counters c;
};

/*
 * event_edge: one cuEventRecord on one stream plus one cuStreamWaitEvent on
 * another, the driver's price of a cross-stream dependency.  Measured once
 * per run when anchors are present; subject is NULL when it was not.
 */
struct bench_edge {
	const struct bench_subject *subject;
	uint32_t from_stream, to_stream;
	uint64_t iters;			/* edges in one timed run */
	unsigned int runs;
	double median_ns;		/* per edge */
	double min_ns;
};

struct bench_report {
	FILE *out;
	bool json;
	bool table_started;
	int name_width;			/* of the subject column, set at the header */
	struct bench_result *results;
	size_t nresults, results_cap;
	struct bench_counter_row *rows;
	size_t nrows, rows_cap;
	struct bench_edge edge;
	struct bench_skip *skips;
	size_t nskips, skips_cap;
	const struct bench_replay *replay;	/* set when replay ran */
};

/* --devices: one listed device, as the header shows it. */
struct bench_device {
	uint32_t ordinal;
	struct xdm_device_info info;
	char stack[512];
};

struct bench_ctx {
	struct bench_opts opts;
	struct bench_subject subjects[BENCH_MAX_SUBJECTS];
	size_t nsubjects;
	struct xdm_device_info dev;	/* with --devices, the first device's */
	char stack[512];
	struct bench_device *devices;	/* --devices: each device, in list order */
	size_t ndevices;		/* 0 without --devices */
	struct bench_subject *edge_subject;	/* the anchor event_edge runs on */
	struct bench_report report;
	struct bench_tree_reader *reader;	/* --read-tree */
	struct bench_replay replay;		/* --replay, loaded before the runtime */
};

/* options.c */
void bench_opts_init(struct bench_opts *o);
int bench_parse_args(int argc, char **argv, struct bench_opts *o);
int bench_parse_lists(struct bench_opts *o);
const char *bench_anchors_name(enum bench_anchors_mode m);

/* subject_xdm.c */
/* bench_subject_xdm_open_on(): ordinal has no device, and probe was asked. */
#define BENCH_NO_DEVICE (-2)
int bench_subject_xdm_open(struct bench_ctx *ctx, struct bench_subject *s);
/*
 * The runtime of ordinal as the options ask for it, its device and stack
 * described into dev and stack.  0, an exit code, said, or (probe true)
 * BENCH_NO_DEVICE, unsaid, where the platform has no such device.
 */
int bench_subject_xdm_open_on(const struct bench_opts *o, uint32_t ordinal, bool probe,
			      struct bench_subject *s, struct xdm_device_info *dev,
			      char *stack, size_t stack_len);
/* --compare: a second runtime on ordinal and the same platform, as "xdm2". */
int bench_subject_compare_open(const struct bench_opts *o, uint32_t ordinal,
			       struct bench_subject *s);

/*
 * devices.c: --devices.  Opens the runtime (and --compare's) of
 * every listed device as groups, finding the devices of "all" first, and
 * fills ctx->devices.  0, or an exit code, said.
 */
int bench_devices_open(struct bench_ctx *ctx);
/* Makes g a group named name of n parts, each zeroed, for the caller to
 * open.  0, or -1 said. */
int bench_group_init(struct bench_subject *g, const char *name, size_t n);
/* Names part d of g "<g's name>@<ordinal>". */
void bench_group_name_part(struct bench_subject *g, size_t d, uint32_t ordinal);

/* replay_csv.c: reads --replay FILE; 0, or BENCH_EXIT_USAGE said. */
int bench_replay_load(const char *path, struct bench_replay *out);
void bench_replay_free(struct bench_replay *r);

/*
 * anchors.c: adds the driver anchors after subjects[0] as --anchors
 * says, and measures event_edge on them.  0, or an exit code, said.
 */
int bench_anchors_open(struct bench_ctx *ctx);
int bench_anchors_event_edge(struct bench_ctx *ctx);

#ifdef XDM_BENCH_CUDA
/* subject_cuda.c and cuda_edge.c: only where configure found cuda.h. */
enum bench_cuda_kind {
	BENCH_CUDA_SYNC,	/* "cuMemAlloc": cuMemAlloc / cuMemFree */
	BENCH_CUDA_ASYNC,	/* "cuMemAllocAsync": the default pool, on streams */
};
/* On device ordinal.  0, or -1 with the reason in why; s is left without priv then. */
int bench_cuda_open(uint32_t ordinal, enum bench_cuda_kind kind, uint32_t nstreams,
		    struct bench_subject *s, char *why, size_t len);
/* On a BENCH_CUDA_ASYNC subject: fills ctx->report.edge.  0, or an exit code, said. */
int bench_cuda_event_edge(struct bench_ctx *ctx, struct bench_subject *s);

/*
 * cuda_touch.c: the streams workload's touch for an xdm runtime on
 * the cuda platform, a cuMemsetD8Async on the runtime's own native stream.
 */
struct bench_cuda_touch;
/* 0, or -1 with the reason in why. */
int bench_cuda_touch_open(uint32_t ordinal, struct bench_cuda_touch **out, char *why,
			  size_t len);
int bench_cuda_touch(struct bench_cuda_touch *t, uint64_t ptr, size_t bytes, void *stream,
		     char *why, size_t len);
void bench_cuda_touch_close(struct bench_cuda_touch *t);
#endif

/* workloads.c, threads.c, streams.c, cross.c and
 * replay.c: 0, or an exit code, said. */
int bench_run_pair(struct bench_ctx *ctx);
int bench_run_random(struct bench_ctx *ctx);
int bench_run_threads(struct bench_ctx *ctx);
int bench_run_streams(struct bench_ctx *ctx);
int bench_run_cross(struct bench_ctx *ctx);
int bench_run_replay(struct bench_ctx *ctx);
int bench_run_ipc(struct bench_ctx *ctx);
/* Runs once(arg) once to warm up, then opts.repeat times, settling after
 * each; samples[] gets each timed run's ns (repeat entries). */
int bench_measure(struct bench_ctx *ctx, struct bench_subject *s,
		  int (*once)(void *arg, uint64_t *ns), void *arg, double *samples);
/* Says on stderr which operation of which workload failed, and why. */
void bench_say_failure(struct bench_subject *s, const char *workload, const char *what,
		       size_t bytes, uint32_t stream);

/* Every subject of ctx under one measurement, runs interleaved round by
 * round; samples[k] gets subject k's timed runs. */
int bench_measure_all(struct bench_ctx *ctx, int (*once)(void *arg, uint64_t *ns),
		      void *args, size_t arg_size, double (*samples)[BENCH_MAX_REPEAT]);
/* The same for the subjects k with run[k] true only (run NULL: all). */
int bench_measure_some(struct bench_ctx *ctx, int (*once)(void *arg, uint64_t *ns),
		       void *args, size_t arg_size, double (*samples)[BENCH_MAX_REPEAT],
		       const bool *run);
/* Fills the timing fields of r from per-run totals of r->ops operations. */
void bench_summarize_totals(struct bench_result *r, double *samples, unsigned int runs);
/*
 * Which subjects can run workload w: run[k] is true for those that have
 * the op it needs (lacks(s) returns why not, or NULL) and whose ready op
 * agrees; a skip is noted for each of the others.  Returns how many can;
 * *rc is 0, or BENCH_EXIT_FAIL when the note could not be kept.
 */
size_t bench_select(struct bench_ctx *ctx, enum bench_workload w,
		    const char *(*lacks)(const struct bench_subject *s), bool *run, int *rc);

/*
 * reserved.c: the fragmentation figure around one workload.  begin
 * restarts each subject's reserved peak (has[k]: it has one); end reads
 * them into peak[], and clears has[k] where the read failed.
 */
void bench_reserved_begin(struct bench_ctx *ctx, bool *has);
void bench_reserved_end(struct bench_ctx *ctx, bool *has, uint64_t *peak);

/* stats.c */
uint64_t bench_now_ns(void);
void bench_summarize(const double *samples, size_t n, double *median, double *min);
struct bench_rng {
	uint64_t state;
};
void bench_rng_seed(struct bench_rng *r, uint64_t seed);
uint64_t bench_rng_next(struct bench_rng *r);
double bench_rng_unit(struct bench_rng *r);
void bench_format_size(uint64_t bytes, char *buf, size_t len);

/* report.c */
const char *bench_workload_name(enum bench_workload w);
void bench_report_header(struct bench_ctx *ctx);
int bench_report_result(struct bench_ctx *ctx, const struct bench_result *r);
int bench_report_counters(struct bench_ctx *ctx, struct bench_subject *s,
			  enum bench_workload after);
/* s does not run w, for the reason why: a note and a JSON entry.  0 or 1. */
int bench_report_skip(struct bench_ctx *ctx, const struct bench_subject *s,
		      enum bench_workload w, const char *why);
void bench_report_finish(struct bench_ctx *ctx, bool leak);
void bench_report_free(struct bench_report *rep);

#endif /* XDM_TOOLS_BENCH_H */
