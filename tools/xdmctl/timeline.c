/* SPDX-License-Identifier: MIT */
/*
 * timeline.c - xdmctl timeline LOG.csv: a logging adaptor's CSV as
 * memory over time, in SVG or in an HTML page (xdmctl(1), TIMELINE).
 *
 * The log is read and drawn before the output is opened, so that a bad
 * log leaves no file behind; a file that cannot be written whole is
 * removed rather than left cut short.
 */
#include "config.h"

#include <string.h>

#include "timeline.h"
#include "xdmctl.h"
#include "args.h"
#include "output.h"

#define CMD "timeline"

struct timeline_opts {
	const char *log;
	const char *out;	/* NULL: standard output */
	bool html;
	enum timeline_by by;
	struct timeline_view view;
};

static void usage(FILE *f)
{
	fputs("Usage: xdmctl timeline LOG.csv [-o FILE] [--html] [--by tag|stream]\n"
	      "                       [--width PX] [--height PX] [--top N]\n"
	      "\n"
	      "Draw the live bytes of a logging adaptor's CSV over time, stacked by tag\n"
	      "(or by stream), as SVG, or as an HTML page with a table (--html).\n"
	      "\n"
	      "  -o, --output FILE  write FILE, not standard output\n"
	      "  --html             an HTML page: the drawing and a table per tag or stream\n"
	      "  --by tag|stream    what the bands are (default tag)\n"
	      "  --width PX         of the drawing, 600 to 20000 (default 1200)\n"
	      "  --height PX        of the drawing, 400 to 20000 (default 520)\n"
	      "  --top N            keys named at the peak, 0 to 50 (default 5)\n"
	      "\n"
	      "See xdmctl(1), TIMELINE.\n",
	      f);
}

/* The options that take a value, and their bounds where the value is a number. */
enum { OPT_OUTPUT, OPT_BY, OPT_WIDTH, OPT_HEIGHT, OPT_TOP };

static const struct value_opt {
	const char *name, *alias;
	unsigned long min, max;
} value_opts[] = {
	[OPT_OUTPUT] = { "--output", "-o", 0, 0 },
	[OPT_BY] = { "--by", NULL, 0, 0 },
	[OPT_WIDTH] = { "--width", NULL, 600, 20000 },
	[OPT_HEIGHT] = { "--height", NULL, 400, 20000 },
	[OPT_TOP] = { "--top", NULL, 0, 50 },
};

#define NVALUE_OPTS (sizeof(value_opts) / sizeof(value_opts[0]))

/* One option's value into *o: 0, or -1 said. */
static int set_value(struct timeline_opts *o, size_t opt, const char *val)
{
	const struct value_opt *vo = &value_opts[opt];
	unsigned long n = 0;

	if (vo->max && xdmctl_arg_uint(CMD, vo->name, val, vo->min, vo->max, &n))
		return -1;
	switch (opt) {
	case OPT_OUTPUT:
		o->out = val;
		break;
	case OPT_BY:
		if (strcmp(val, "tag") == 0)
			o->by = TIMELINE_BY_TAG;
		else if (strcmp(val, "stream") == 0)
			o->by = TIMELINE_BY_STREAM;
		else
			return xdmctl_fail(-1, CMD, "--by takes tag or stream, not '%s'", val);
		break;
	case OPT_WIDTH:
		o->view.width = (unsigned int)n;
		break;
	case OPT_HEIGHT:
		o->view.height = (unsigned int)n;
		break;
	case OPT_TOP:
		o->view.top = (unsigned int)n;
		break;
	}
	return 0;
}

/* 0 with *o filled, 1 when --help was answered, or -1 said. */
static int parse(int argc, char **argv, struct timeline_opts *o)
{
	for (int i = 1; i < argc; i++) {
		const char *val = NULL;
		size_t opt;
		int got = 0;

		if (xdmctl_arg_help(argv[i])) {
			usage(stdout);
			return 1;
		}
		if (strcmp(argv[i], "--html") == 0) {
			o->html = true;
			continue;
		}
		for (opt = 0; opt < NVALUE_OPTS && got == 0; opt++)
			got = xdmctl_arg_value(CMD, argc, argv, &i, value_opts[opt].name,
					       value_opts[opt].alias, &val);
		if (got < 0)
			return -1;
		/* The loop went one past the option that took the word. */
		if (got > 0 ? set_value(o, opt - 1, val) : xdmctl_arg_log(CMD, argv[i], &o->log))
			return -1;
	}
	return xdmctl_arg_log_given(CMD, o->log, "xdmctl timeline LOG.csv");
}

/* The drawing into o->out, or standard output: an exit code. */
static int write_out(const struct timeline *tl, const struct timeline_opts *o)
{
	FILE *f = xdmctl_output_open(CMD, o->out);
	int drawn;

	if (!f)
		return XDMCTL_EXIT_FAIL;
	drawn = o->html ? timeline_html(f, tl, &o->view) : timeline_svg(f, tl, &o->view);
	if (drawn)
		xdmctl_fail(XDMCTL_EXIT_FAIL, CMD, "out of memory drawing %s", o->log);
	return xdmctl_output_close(CMD, o->out, f, drawn == 0);
}

int xdmctl_timeline(struct xdmctl_ctx *ctx, int argc, char **argv)
{
	struct timeline_opts o = {
		.by = TIMELINE_BY_TAG,
		.view = { .width = 1200, .height = 520, .top = 5 },
	};
	struct logcsv log;
	struct timeline tl;
	int rc;

	rc = parse(argc, argv, &o);
	if (rc)
		return rc > 0 ? XDMCTL_EXIT_OK : XDMCTL_EXIT_USAGE;
	if (ctx->json)
		return xdmctl_fail(XDMCTL_EXIT_USAGE, CMD, "writes SVG or HTML, not JSON (--json)");
	o.view.title = o.log;
	rc = logcsv_load(&log, "xdmctl: " CMD, o.log);
	if (rc)
		return rc == LOGCSV_NOMEM ? XDMCTL_EXIT_FAIL : XDMCTL_EXIT_USAGE;
	rc = timeline_build(&tl, &log, o.by, timeline_plot_width(o.view.width));
	if (rc) {
		rc = rc == LOGCSV_NOMEM ? XDMCTL_EXIT_FAIL : XDMCTL_EXIT_USAGE;
		goto out_log;
	}
	rc = write_out(&tl, &o);
	timeline_free(&tl);
out_log:
	logcsv_free(&log);
	return rc;
}
