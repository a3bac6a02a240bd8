/* SPDX-License-Identifier: MIT */
/*
 * check_config.c - the xdm.conf parser, config loading, xdm_parse_size()
 * and xdm_uuid_format().
 *
 * Links core/libxdmcore.la, not libxdm, because the parser's functions are
 * internal to the library.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xdm/module.h>

#include "core/conf.h"
#include "core/ipc.h"

#ifndef XDM_TEST_SRCDIR
#define XDM_TEST_SRCDIR "."
#endif

/* A value *out must still hold after a failed call. */
#define UNTOUCHED ((struct xdm_config *)(uintptr_t)0x5ca1ab1e)

static const char *msg(void)
{
	return xdm_last_error()->message;
}

static struct xdm_config *parse_ok(const char *text)
{
	struct xdm_config *cfg = NULL;
	enum xdm_status st = xdm_config_parse("t.conf", text, &cfg);

	ck_assert_msg(st == XDM_OK, "parse failed (%d): %s", st, msg());
	ck_assert_ptr_nonnull(cfg);
	return cfg;
}

/*
 * text must fail to parse with exactly "t.conf:LINE:COL: ..., at 'TOKEN'",
 * and must leave *out alone.  what, if not NULL, must appear in the sentence.
 */
static void parse_err(const char *text, unsigned int line, unsigned int col, const char *token,
		      const char *what)
{
	struct xdm_config *cfg = UNTOUCHED;
	char prefix[64], suffix[128];
	enum xdm_status st = xdm_config_parse("t.conf", text, &cfg);
	const char *m = msg();
	size_t ml = strlen(m), sl;

	ck_assert_msg(st == XDM_E_CONFIG, "expected XDM_E_CONFIG, got %d for <<%s>>", st, text);
	ck_assert_ptr_eq(cfg, UNTOUCHED);
	ck_assert_int_eq(xdm_last_error()->code, XDM_E_CONFIG);
	snprintf(prefix, sizeof(prefix), "t.conf:%u:%u: ", line, col);
	ck_assert_msg(!strncmp(m, prefix, strlen(prefix)), "message '%s' does not start with '%s'",
		      m, prefix);
	snprintf(suffix, sizeof(suffix), ", at '%s'", token);
	sl = strlen(suffix);
	ck_assert_msg(ml > sl && !strcmp(m + ml - sl, suffix),
		      "message '%s' does not end with '%s'", m, suffix);
	if (what)
		ck_assert_msg(strstr(m, what), "message '%s' does not say '%s'", m, what);
}

static void assert_param(const struct xdm_conf_layer *l, size_t i, const char *key,
			 const char *value, unsigned int line, unsigned int col)
{
	ck_assert_uint_gt(l->nparams, i);
	ck_assert_str_eq(l->params[i].key, key);
	ck_assert_str_eq(l->params[i].value, value);
	ck_assert_uint_eq(l->params[i].line, line);
	ck_assert_uint_eq(l->params[i].col, col);
}

static void assert_layer(const struct xdm_conf_stack *s, size_t i, const char *module,
			 size_t nparams, unsigned int line, unsigned int col)
{
	ck_assert_uint_gt(s->nlayers, i);
	ck_assert_str_eq(s->layers[i].module, module);
	ck_assert_uint_eq(s->layers[i].nparams, nparams);
	ck_assert_uint_eq(s->layers[i].line, line);
	ck_assert_uint_eq(s->layers[i].col, col);
}

/* Write len bytes to a new temporary file; its name goes to path. */
static void write_temp(const void *data, size_t len, char *path, size_t pathlen)
{
	const char *dir = getenv("TMPDIR");
	int fd;

	snprintf(path, pathlen, "%s/check_config.XXXXXX", dir && *dir ? dir : "/tmp");
	fd = mkstemp(path);
	ck_assert_msg(fd >= 0, "mkstemp %s: %s", path, strerror(errno));
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
}

/* ---- good files --------------------------------------------------------- */

START_TEST(test_empty_text_gets_defaults)
{
	struct xdm_config *cfg = parse_ok("");

	ck_assert_str_eq(cfg->source, "t.conf");
	ck_assert_str_eq(cfg->text, "");
	ck_assert_ptr_null(cfg->module_dir);
	ck_assert_ptr_null(cfg->mount);
	ck_assert_uint_eq(cfg->nplatforms, 2);
	ck_assert_str_eq(cfg->platforms[0], "cuda");
	ck_assert_str_eq(cfg->platforms[1], "host");
	ck_assert_uint_eq(cfg->platform_line, 0);
	ck_assert_uint_eq(cfg->streams, XDM_DEFAULT_STREAMS);
	ck_assert_uint_eq(cfg->ndevices, 0);
	ck_assert_ptr_null(xdm_config_device(cfg, 0));
	xdm_config_free(cfg);
}
END_TEST

START_TEST(test_globals)
{
	const char *text = "module_dir = /opt/xdm/modules\n"
			   "mount=/mnt/xdm\n"
			   "  platform =  host ,cuda,  fake_1   \n"
			   "streams = 256\n";
	struct xdm_config *cfg = parse_ok(text);

	ck_assert_str_eq(cfg->text, text);
	ck_assert_str_eq(cfg->module_dir, "/opt/xdm/modules");
	ck_assert_str_eq(cfg->mount, "/mnt/xdm");
	ck_assert_uint_eq(cfg->nplatforms, 3);
	ck_assert_str_eq(cfg->platforms[0], "host");
	ck_assert_str_eq(cfg->platforms[1], "cuda");
	ck_assert_str_eq(cfg->platforms[2], "fake_1");
	ck_assert_uint_eq(cfg->platform_line, 3);
	ck_assert_uint_eq(cfg->platform_col, 15);
	ck_assert_uint_eq(cfg->streams, 256);
	xdm_config_free(cfg);
}
END_TEST

START_TEST(test_platform_parameters)
{
	struct xdm_config *cfg = parse_ok("platform = host devices=3 memory=\"8G\" , cuda\n");
	const struct xdm_conf_layer *h = &cfg->platform_specs[0];

	ck_assert_uint_eq(cfg->nplatforms, 2);
	ck_assert_str_eq(cfg->platforms[0], "host");
	ck_assert_str_eq(cfg->platforms[1], "cuda");
	ck_assert_str_eq(h->module, "host");
	ck_assert_uint_eq(h->line, 1);
	ck_assert_uint_eq(h->col, 12);
	ck_assert_uint_eq(h->nparams, 2);
	assert_param(h, 0, "devices", "3", 1, 17);
	assert_param(h, 1, "memory", "8G", 1, 27);
	ck_assert_str_eq(cfg->platform_specs[1].module, "cuda");
	ck_assert_uint_eq(cfg->platform_specs[1].nparams, 0);
	xdm_config_free(cfg);

	parse_err("platform = host devices=\n", 1, 17, "devices=", "empty value");
	parse_err("platform = host devices=2 devices=3\n", 1, 27, "devices",
		  "given twice");
	parse_err("platform = host =2\n", 1, 17, "=2", "no name");
	parse_err("platform = host devices=2,\n", 1, 26, ",", "empty platform");
}
END_TEST

/* A named platform list (xdm_runtime_create's argument) replaces the file's, or nothing. */
START_TEST(test_platform_list_of_a_caller)
{
	struct xdm_config *cfg = parse_ok("platform = cuda\n");

	ck_assert_int_eq(xdm_config_set_platforms(cfg, "<platform>", "host devices="),
			 XDM_E_CONFIG);
	ck_assert_ptr_nonnull(strstr(msg(), "<platform>:1:6: "));
	ck_assert_uint_eq(cfg->nplatforms, 1);
	ck_assert_str_eq(cfg->platforms[0], "cuda");
	ck_assert_int_eq(xdm_config_set_platforms(cfg, "<platform>", "host devices=2"), XDM_OK);
	ck_assert_uint_eq(cfg->nplatforms, 1);
	ck_assert_str_eq(cfg->platform_specs[0].module, "host");
	assert_param(&cfg->platform_specs[0], 0, "devices", "2", 1, 6);
	xdm_config_free(cfg);
}
END_TEST

START_TEST(test_comments_blank_lines_crlf)
{
	struct xdm_config *cfg = parse_ok("# a comment\r\n"
					  "\r\n"
					  "   \t\n"
					  "\t# indented comment\n"
					  "platform = host# no space needed\r\n"
					  "streams = 1 # one\n"
					  "[device 2]   # section comment\n"
					  "stack = host\r\n");

	ck_assert_uint_eq(cfg->nplatforms, 1);
	ck_assert_str_eq(cfg->platforms[0], "host");
	ck_assert_uint_eq(cfg->streams, 1);
	ck_assert_uint_eq(cfg->ndevices, 1);
	ck_assert_uint_eq(cfg->devices[0].line, 7);
	assert_layer(&cfg->devices[0].stack, 0, "host", 0, 8, 9);
	xdm_config_free(cfg);
}
END_TEST

/* The example of the design and of xdm.conf(5), layer by layer. */
START_TEST(test_full_example)
{
	struct xdm_config *cfg = parse_ok(
		"# comment lines and trailing \"# comments\"; blank lines ignored\n"
		"module_dir = /path/to/modules\n"
		"mount = /mnt/xdm\n"
		"platform = cuda, host        # preference list: the first that initializes wins\n"
		"streams = 16                 # non-blocking streams per runtime, 1..256\n"
		"\n"
		"[device 0]\n"
		"stack = budget limit=80% | logging path=/var/log/xdm/%p-%d.csv | pool initial=1G"
		" | cuda_async\n"
		"streams = 32\n"
		"\n"
		"[device *]\n"
		"stack = cuda_async\n");
	const struct xdm_conf_device *d0, *dw;
	const struct xdm_conf_stack *s;

	ck_assert_str_eq(cfg->module_dir, "/path/to/modules");
	ck_assert_str_eq(cfg->mount, "/mnt/xdm");
	ck_assert_uint_eq(cfg->nplatforms, 2);
	ck_assert_str_eq(cfg->platforms[0], "cuda");
	ck_assert_uint_eq(cfg->platform_line, 4);
	ck_assert_uint_eq(cfg->platform_col, 12);
	ck_assert_uint_eq(cfg->streams, 16);
	ck_assert_uint_eq(cfg->ndevices, 2);

	d0 = &cfg->devices[0];
	ck_assert(!d0->wildcard);
	ck_assert_uint_eq(d0->ordinal, 0);
	ck_assert_uint_eq(d0->line, 7);
	ck_assert(d0->has_stack);
	ck_assert_uint_eq(d0->streams, 32);
	s = &d0->stack;
	ck_assert_uint_eq(s->nlayers, 4);
	assert_layer(s, 0, "budget", 1, 8, 9);
	assert_param(&s->layers[0], 0, "limit", "80%", 8, 16);
	assert_layer(s, 1, "logging", 1, 8, 28);
	assert_param(&s->layers[1], 0, "path", "/var/log/xdm/%p-%d.csv", 8, 36);
	assert_layer(s, 2, "pool", 1, 8, 66);
	assert_param(&s->layers[2], 0, "initial", "1G", 8, 71);
	assert_layer(s, 3, "cuda_async", 0, 8, 84);

	dw = &cfg->devices[1];
	ck_assert(dw->wildcard);
	ck_assert_uint_eq(dw->line, 11);
	ck_assert_uint_eq(dw->streams, 0);
	ck_assert_uint_eq(dw->stack.nlayers, 1);
	assert_layer(&dw->stack, 0, "cuda_async", 0, 12, 9);
	xdm_config_free(cfg);
}
END_TEST

START_TEST(test_stack_params_and_spacing)
{
	/* No blanks around '|', several params, '=' and '%' inside values. */
	struct xdm_config *cfg = parse_ok("[device 3]\n"
					  "stack=a x=1 y=a=b z=50%|b|c  k_2=/x/y  \n");
	const struct xdm_conf_stack *s = &cfg->devices[0].stack;

	ck_assert_uint_eq(s->nlayers, 3);
	assert_layer(s, 0, "a", 3, 2, 7);
	assert_param(&s->layers[0], 0, "x", "1", 2, 9);
	assert_param(&s->layers[0], 1, "y", "a=b", 2, 13);
	assert_param(&s->layers[0], 2, "z", "50%", 2, 19);
	assert_layer(s, 1, "b", 0, 2, 25);
	assert_layer(s, 2, "c", 1, 2, 27);
	assert_param(&s->layers[2], 0, "k_2", "/x/y", 2, 30);
	xdm_config_free(cfg);
}
END_TEST

START_TEST(test_quoted_values)
{
	struct xdm_config *cfg = parse_ok(
		"module_dir = \"/opt/my modules\"  # spaces need quotes\n"
		"mount = \"/mnt/a#b\"\n"
		"[device 0]\n"
		"stack = logging path=\"x\\\"y\\\\z # w|v\" tag=\"|\" | host\n");
	const struct xdm_conf_stack *s = &cfg->devices[0].stack;

	ck_assert_str_eq(cfg->module_dir, "/opt/my modules");
	ck_assert_str_eq(cfg->mount, "/mnt/a#b");
	ck_assert_uint_eq(s->nlayers, 2);
	assert_layer(s, 0, "logging", 2, 4, 9);
	assert_param(&s->layers[0], 0, "path", "x\"y\\z # w|v", 4, 17);
	assert_param(&s->layers[0], 1, "tag", "|", 4, 38);
	assert_layer(s, 1, "host", 0, 4, 48);
	xdm_config_free(cfg);
}
END_TEST

START_TEST(test_continuation_lines)
{
	struct xdm_config *cfg = parse_ok("[device 1]\n"
					  "stack = budget limit=1G \\\n"
					  "    | pool initial=\"a \\\n"
					  "b\" \\\r\n"
					  "    | host\n"
					  "# a comment ending in a backslash does not continue \\\n"
					  "streams = 8 # nor does this one \\\n"
					  "[device 2]\n");
	const struct xdm_conf_device *d = &cfg->devices[0];
	const struct xdm_conf_stack *s = &d->stack;

	ck_assert_uint_eq(cfg->ndevices, 2);
	ck_assert_uint_eq(cfg->devices[1].ordinal, 2);
	ck_assert_uint_eq(d->ordinal, 1);
	ck_assert_uint_eq(d->streams, 8);
	ck_assert_uint_eq(s->nlayers, 3);
	assert_layer(s, 0, "budget", 1, 2, 9);
	assert_param(&s->layers[0], 0, "limit", "1G", 2, 16);
	assert_layer(s, 1, "pool", 1, 3, 7);
	assert_param(&s->layers[1], 0, "initial", "a b", 3, 12);
	assert_layer(s, 2, "host", 0, 5, 7);
	xdm_config_free(cfg);
}
END_TEST

START_TEST(test_device_lookup_precedence)
{
	struct xdm_config *cfg = parse_ok("[device *]\nstack = w\n"
					  "[device 5]\nstack = five\nstreams = 4\n"
					  "[device 63]\n");
	const struct xdm_conf_device *d;

	d = xdm_config_device(cfg, 5);
	ck_assert_ptr_nonnull(d);
	ck_assert_str_eq(d->stack.layers[0].module, "five");
	ck_assert_uint_eq(d->streams, 4);
	d = xdm_config_device(cfg, 0);
	ck_assert_ptr_nonnull(d);
	ck_assert(d->wildcard);
	ck_assert_str_eq(d->stack.layers[0].module, "w");
	d = xdm_config_device(cfg, 63);
	ck_assert_ptr_nonnull(d);
	ck_assert(!d->wildcard);
	ck_assert(!d->has_stack);
	ck_assert_uint_eq(d->stack.nlayers, 0);
	xdm_config_free(cfg);

	cfg = parse_ok("[device 2]\nstack = two\n");
	ck_assert_ptr_null(xdm_config_device(cfg, 0));
	ck_assert_ptr_nonnull(xdm_config_device(cfg, 2));
	xdm_config_free(cfg);
}
END_TEST

START_TEST(test_parse_stack_alone)
{
	struct xdm_conf_stack s = { NULL, 0 };

	ck_assert_int_eq(xdm_config_parse_stack("<stack>", "budget limit=1G | host", &s), XDM_OK);
	ck_assert_uint_eq(s.nlayers, 2);
	assert_layer(&s, 0, "budget", 1, 1, 1);
	assert_param(&s.layers[0], 0, "limit", "1G", 1, 8);
	assert_layer(&s, 1, "host", 0, 1, 19);
	xdm_conf_stack_free(&s);
	ck_assert_ptr_null(s.layers);
	ck_assert_uint_eq(s.nlayers, 0);

	/* What "echo" sends: one trailing newline. */
	ck_assert_int_eq(xdm_config_parse_stack("<stack>", "  host  \n", &s), XDM_OK);
	assert_layer(&s, 0, "host", 0, 1, 3);
	xdm_conf_stack_free(&s);
}
END_TEST

START_TEST(test_parse_stack_alone_errors)
{
	struct xdm_conf_stack s = { (struct xdm_conf_layer *)UNTOUCHED, 7 };

	ck_assert_int_eq(xdm_config_parse_stack("<stack>", "host\nbudget", &s), XDM_E_CONFIG);
	ck_assert_str_eq(msg(), "<stack>:2:1: a stack spec is one line, at 'budget'");
	ck_assert_int_eq(xdm_config_parse_stack("<stack>", "", &s), XDM_E_CONFIG);
	ck_assert_str_eq(msg(), "<stack>:1:1: a stack needs at least one layer, at ''");
	ck_assert_int_eq(xdm_config_parse_stack("cli", "a |  | b", &s), XDM_E_CONFIG);
	ck_assert_str_eq(msg(), "cli:1:6: empty layer in the stack, at '|'");
	ck_assert_ptr_eq(s.layers, (struct xdm_conf_layer *)UNTOUCHED);
	ck_assert_uint_eq(s.nlayers, 7);
}
END_TEST

START_TEST(test_embedded_default)
{
	struct xdm_config *cfg = parse_ok(xdm_config_embedded());

	ck_assert_uint_eq(cfg->nplatforms, 2);
	ck_assert_str_eq(cfg->platforms[0], "cuda");
	ck_assert_str_eq(cfg->platforms[1], "host");
	ck_assert_uint_eq(cfg->platform_line, 1);
	ck_assert_uint_eq(cfg->ndevices, 0);
	ck_assert_uint_eq(cfg->streams, XDM_DEFAULT_STREAMS);
	ck_assert_ptr_null(cfg->module_dir);
	xdm_config_free(cfg);
}
END_TEST

START_TEST(test_sample_config_parses)
{
	struct xdm_config *cfg = NULL;
	char path[4096];

	snprintf(path, sizeof(path), "%s/examples/xdm.conf", XDM_TEST_SRCDIR);
	ck_assert_int_eq(setenv("XDM_CONFIG", path, 1), 0);
	ck_assert_msg(xdm_config_load(&cfg) == XDM_OK, "%s", msg());
	ck_assert_str_eq(cfg->source, path);
	ck_assert_uint_ge(cfg->nplatforms, 1);
	xdm_config_free(cfg);
}
END_TEST

/* ---- errors: the exact position and token -------------------------------- */

START_TEST(test_err_format_exact)
{
	struct xdm_config *cfg = UNTOUCHED;

	ck_assert_int_eq(xdm_config_parse("/etc/xdm.conf", "platform = host\n\ncolour = blue\n",
					  &cfg),
			 XDM_E_CONFIG);
	ck_assert_str_eq(msg(), "/etc/xdm.conf:3:1: unknown key (the global keys are module_dir, "
			 "mount, platform, streams and ipc_allow), at 'colour'");
	ck_assert_ptr_eq(cfg, UNTOUCHED);
}
END_TEST

/*
 * ipc_allow: users and groups by name or number, kept as written; a name
 * that no user or group has is an error at its own column (root and group
 * 0 exist on any machine the suite runs on; the made-up names on none).
 */
START_TEST(test_ipc_allow)
{
	struct xdm_config *cfg = parse_ok("ipc_allow = root, 1001 @0,@root\n");
	struct xdm_ipc_allow a;
	size_t at, len;
	char why[192];

	ck_assert_str_eq(cfg->ipc_allow, "root, 1001 @0,@root");
	ck_assert(xdm_ipc_allow_parse(cfg->ipc_allow, &a, &at, &len, why, sizeof(why)));
	ck_assert_uint_eq(a.nuids, 2);
	ck_assert_uint_eq(a.uids[0], 0);
	ck_assert_uint_eq(a.uids[1], 1001);
	ck_assert_uint_eq(a.ngids, 2);
	ck_assert_uint_eq(a.gids[0], 0);
	ck_assert_uint_eq(a.gids[1], 0);
	xdm_config_free(cfg);

	parse_err("ipc_allow = root, xdmtest-nobody-here\n", 1, 19, "xdmtest-nobody-here",
		  "no user is named 'xdmtest-nobody-here'");
	parse_err("ipc_allow = @xdmtest-nogroup-here\n", 1, 13, "@xdmtest-nogroup-here",
		  "no group is named 'xdmtest-nogroup-here'");
	parse_err("ipc_allow = root,@\n", 1, 18, "@", "an entry of ipc_allow");
	/* (uid_t)-1 is the kernel's "none", never a user. */
	parse_err("ipc_allow = 4294967295\n", 1, 13, "4294967295", "no user is named");
	parse_err("[device 0]\nipc_allow = root\n", 2, 1, "ipc_allow", "global key");
	parse_err("ipc_allow = root\nipc_allow = root\n", 2, 1, "ipc_allow", "duplicate");
}
END_TEST

START_TEST(test_ipc_allow_bounds)
{
	char text[1024] = "ipc_allow =";
	size_t n = strlen(text);

	for (int i = 0; i < XDM_IPC_ALLOW_MAX; i++)
		n += (size_t)snprintf(text + n, sizeof(text) - n, " %d", 2000 + i);
	snprintf(text + n, sizeof(text) - n, "\n");
	xdm_config_free(parse_ok(text));
	snprintf(text + n, sizeof(text) - n, " 9999\n");
	parse_err(text, 1, (unsigned int)n + 2, "9999", "more than");
}
END_TEST

START_TEST(test_err_unknown_keys)
{
	parse_err("  colour = blue\n", 1, 3, "colour", "unknown key");
	parse_err("[device 0]\nstack = host\nlimit = 8G\n", 3, 1, "limit",
		  "a device section takes stack and streams");
	parse_err("Platform = host\n", 1, 1, "Platform", "unknown key");
	parse_err("plat-form = host\n", 1, 1, "plat-form", "invalid key");
	parse_err("= host\n", 1, 1, "= host", "missing key");
}
END_TEST

START_TEST(test_err_key_in_wrong_scope)
{
	parse_err("[device 0]\nstack = host\n\nmount = /mnt/xdm\n", 4, 1, "mount",
		  "global key 'mount' inside section [device 0]");
	parse_err("[device *]\n platform = host\n", 2, 2, "platform", "section [device *]");
	parse_err("[device 1]\nmodule_dir = /x\n", 2, 1, "module_dir", "[device 1]");
	parse_err("stack = host\n", 1, 1, "stack", "belongs in a [device N] or [device *]");
}
END_TEST

START_TEST(test_err_duplicates)
{
	parse_err("streams = 2\n#\nstreams = 3\n", 3, 1, "streams", "first set on line 1");
	parse_err("[device 0]\nstack = a\nstack = b\n", 3, 1, "stack", "first set on line 2");
	/* The same key in two sections, or globally and in a section, is fine. */
	xdm_config_free(parse_ok("streams = 2\n[device 0]\nstreams = 3\n"
				 "[device 1]\nstreams = 4\n"));
	parse_err("[device 0]\n[device 1]\n[device 0]\n", 3, 1, "[device 0]",
		  "duplicate section (first on line 1)");
	parse_err("[device *]\n[ device   * ]\n", 2, 1, "[ device   * ]", "duplicate section");
	parse_err("platform = cuda, host, cuda\n", 1, 24, "cuda", "platform named twice");
}
END_TEST

START_TEST(test_err_section_headers)
{
	parse_err("[device]\n", 1, 1, "[device]", "needs an ordinal or '*'");
	parse_err("  [device   ]\n", 1, 3, "[device   ]", "needs an ordinal");
	parse_err("[device 64]\n", 1, 9, "64", "out of range 0..63");
	parse_err("[device 99999999999999999999]\n", 1, 9, "99999999999999999999",
		  "out of range");
	parse_err("[device -1]\n", 1, 9, "-1", "a number or '*'");
	parse_err("[device 0x1]\n", 1, 9, "0x1", "a number or '*'");
	parse_err("[device 1 2]\n", 1, 11, "2", "junk in the section header");
	parse_err("[device 1] x\n", 1, 12, "x", "junk after the section header");
	parse_err("[device 1\n", 1, 1, "[device 1", "unterminated section header");
	parse_err("[gpu 0]\n", 1, 2, "gpu", "unknown section");
	parse_err("[]\n", 1, 1, "[]", "unknown section");
}
END_TEST

START_TEST(test_err_missing_equals_and_empty_values)
{
	parse_err("streams 16\n", 1, 9, "16", "expected '=' after the key");
	parse_err("\n  streams\n", 2, 3, "streams", "expected '=' after the key");
	parse_err("mount =   \n", 1, 1, "mount", "empty value");
	parse_err("mount = # only a comment\n", 1, 1, "mount", "empty value");
	parse_err("[device 0]\nstack =\n", 2, 1, "stack", "empty value");
	parse_err("mount = \"\"\n", 1, 9, "\"\"", "empty value");
}
END_TEST

START_TEST(test_err_streams)
{
	parse_err("streams = 0\n", 1, 11, "0", "1..256");
	parse_err("streams = 257\n", 1, 11, "257", "1..256");
	parse_err("streams = 99999999999999\n", 1, 11, "99999999999999", "1..256");
	parse_err("streams = -1\n", 1, 11, "-1", "1..256");
	parse_err("streams = 1.5\n", 1, 11, "1.5", "1..256");
	parse_err("streams = 4 4\n", 1, 11, "4 4", "1..256");
	parse_err("[device 0]\nstreams = lots\n", 2, 11, "lots", "an integer in 1..256");
}
END_TEST

START_TEST(test_err_values_with_junk)
{
	parse_err("mount = /mnt/my xdm\n", 1, 17, "xdm", "junk after the value");
	parse_err("mount = \"/mnt/x\"y\n", 1, 17, "y", "junk after the value");
	parse_err("module_dir = /a\"b\n", 1, 16, "\"b", "quote the whole value");
	parse_err("platform = cuda,,host\n", 1, 17, ",", "empty platform name");
	parse_err("platform = cuda,\n", 1, 16, ",", "empty platform name");
	parse_err("platform = , cuda\n", 1, 12, ",", "empty platform name");
	parse_err("platform = cuda host\n", 1, 17, "host", "expected ','");
	parse_err("platform = 1cuda\n", 1, 12, "1cuda", "invalid platform name");
}
END_TEST

START_TEST(test_err_empty_layers)
{
	parse_err("[device 0]\nstack = a | | b\n", 2, 13, "|", "empty layer");
	parse_err("[device 0]\nstack = a |\n", 2, 11, "|", "empty layer");
	parse_err("[device 0]\nstack = a |   # trailing bar\n", 2, 11, "|", "empty layer");
	parse_err("[device 0]\nstack = | a\n", 2, 9, "|", "empty layer");
	parse_err("[device 0]\nstack = a||b\n", 2, 11, "|", "empty layer");
}
END_TEST

START_TEST(test_err_module_names)
{
	parse_err("[device 0]\nstack = 9pool | host\n", 2, 9, "9pool", "invalid module name");
	parse_err("[device 0]\nstack = po-ol\n", 2, 9, "po-ol", "invalid module name");
	parse_err("[device 0]\nstack = limit=1G | host\n", 2, 9, "limit=1G",
		  "starts with a module name");
	parse_err("[device 0]\nstack = _x\n", 2, 9, "_x", "starting with a letter");
}
END_TEST

START_TEST(test_err_params)
{
	parse_err("[device 0]\nstack = budget limit | host\n", 2, 16, "limit",
		  "expected a key=value parameter");
	parse_err("[device 0]\nstack = budget =1G\n", 2, 16, "=1G", "no name");
	parse_err("[device 0]\nstack = budget limit= | host\n", 2, 16, "limit=",
		  "empty value for the parameter");
	parse_err("[device 0]\nstack = budget limit=\n", 2, 16, "limit=", "empty value");
	parse_err("[device 0]\nstack = budget limit=|host\n", 2, 16, "limit=", "empty value");
	parse_err("[device 0]\nstack = budget li-mit=1\n", 2, 16, "li-mit",
		  "invalid parameter name");
	parse_err("[device 0]\nstack = budget limit=1 limit=2\n", 2, 24, "limit",
		  "given twice");
	parse_err("[device 0]\nstack = budget limit=a\"b\n", 2, 23, "\"b", "quote the whole");
}
END_TEST

START_TEST(test_err_quotes)
{
	parse_err("[device 0]\nstack = logging path=\"/tmp/x | host\n", 2, 22,
		  "\"/tmp/x | host", "unterminated quoted value");
	parse_err("[device 0]\nstack = logging path=\"/tmp/x\\\"\n", 2, 22, "\"/tmp/x\\\"",
		  "unterminated");
	parse_err("[device 0]\nstack = logging path=\"a\\nb\"\n", 2, 24, "\\n",
		  "unknown escape");
	parse_err("[device 0]\nstack = logging path=\"a\"b | host\n", 2, 25, "b",
		  "junk after the closing quote");
	parse_err("mount = \"/mnt\n", 1, 9, "\"/mnt", "unterminated");
}
END_TEST

START_TEST(test_err_positions_after_continuation)
{
	parse_err("[device 0]\n"
		  "stack = budget limit=1G \\\n"
		  "\t| | host\n", 3, 4, "|", "empty layer");
	parse_err("[device 0]\n"
		  "stack = budget \\\n"
		  "   \\\n"
		  "      limit=1G bad\n", 4, 16, "bad", "expected a key=value");
	/* A token at the very start of a continuation line. */
	parse_err("[device 0]\nstack = a |\\\n| b\n", 3, 1, "|", "empty layer");
	/* The error is on line 5 even though the logical line began on 2. */
	parse_err("[device 0]\n"
		  "stack = a \\\n"
		  "  | b \\\n"
		  "  # a comment ends a continued line too\n"
		  "streams = x\n", 5, 11, "x", "1..256");
}
END_TEST

START_TEST(test_err_long_token_truncated)
{
	char text[256];
	const char *m;

	snprintf(text, sizeof(text), "[device 0]\nstack = %s\n",
		 "a-very-long-module-name-that-goes-on-and-on-and-on-forever");
	parse_err(text, 2, 9, "a-very-long-module-name-that-goes-on-...", "invalid module name");
	m = msg();
	ck_assert_ptr_null(strstr(m, "forever"));
}
END_TEST

START_TEST(test_err_control_chars_in_token)
{
	parse_err("mount = a\001b c\n", 1, 13, "c", "junk");
	parse_err("co\001lour = 1\n", 1, 1, "co?lour", "invalid key");
}
END_TEST

/* ---- loading ------------------------------------------------------------ */

START_TEST(test_load_from_env)
{
	static const char text[] = "platform = host\nstreams = 3\n";
	struct xdm_config *cfg = NULL;
	char path[4096];

	write_temp(text, strlen(text), path, sizeof(path));
	ck_assert_int_eq(setenv("XDM_CONFIG", path, 1), 0);
	ck_assert_msg(xdm_config_load(&cfg) == XDM_OK, "%s", msg());
	ck_assert_str_eq(cfg->source, path);
	ck_assert_str_eq(cfg->text, text);
	ck_assert_uint_eq(cfg->nplatforms, 1);
	ck_assert_str_eq(cfg->platforms[0], "host");
	ck_assert_uint_eq(cfg->streams, 3);
	xdm_config_free(cfg);
	unlink(path);
}
END_TEST

START_TEST(test_load_env_missing_file)
{
	struct xdm_config *cfg = UNTOUCHED;

	ck_assert_int_eq(setenv("XDM_CONFIG", "/nonexistent/dir/xdm.conf", 1), 0);
	ck_assert_int_eq(xdm_config_load(&cfg), XDM_E_CONFIG);
	ck_assert_str_eq(msg(), "cannot read config '/nonexistent/dir/xdm.conf': "
			 "No such file or directory");
	ck_assert_ptr_eq(cfg, UNTOUCHED);
}
END_TEST

START_TEST(test_load_env_directory)
{
	struct xdm_config *cfg = UNTOUCHED;

	ck_assert_int_eq(setenv("XDM_CONFIG", "/", 1), 0);
	ck_assert_int_eq(xdm_config_load(&cfg), XDM_E_CONFIG);
	ck_assert_str_eq(msg(), "cannot read config '/': Is a directory");
	ck_assert_ptr_eq(cfg, UNTOUCHED);
}
END_TEST

START_TEST(test_load_env_parse_error_names_file)
{
	static const char text[] = "platform = host\n[device 0]\nstack = a | | b\n";
	struct xdm_config *cfg = UNTOUCHED;
	char path[4096], want[4200];

	write_temp(text, strlen(text), path, sizeof(path));
	ck_assert_int_eq(setenv("XDM_CONFIG", path, 1), 0);
	ck_assert_int_eq(xdm_config_load(&cfg), XDM_E_CONFIG);
	snprintf(want, sizeof(want), "%s:3:13: empty layer in the stack, at '|'", path);
	ck_assert_str_eq(msg(), want);
	ck_assert_ptr_eq(cfg, UNTOUCHED);
	unlink(path);
}
END_TEST

START_TEST(test_load_size_limit)
{
	const size_t mib = 1024 * 1024;
	struct xdm_config *cfg = NULL;
	char *big = malloc(mib + 1);
	char path[4096];

	ck_assert_ptr_nonnull(big);
	/* Exactly 1 MiB of blank lines is accepted... */
	memset(big, '\n', mib + 1);
	write_temp(big, mib, path, sizeof(path));
	ck_assert_int_eq(setenv("XDM_CONFIG", path, 1), 0);
	ck_assert_msg(xdm_config_load(&cfg) == XDM_OK, "%s", msg());
	ck_assert_uint_eq(strlen(cfg->text), mib);
	xdm_config_free(cfg);
	unlink(path);

	/* ...one byte more is not. */
	cfg = UNTOUCHED;
	write_temp(big, mib + 1, path, sizeof(path));
	ck_assert_int_eq(setenv("XDM_CONFIG", path, 1), 0);
	ck_assert_int_eq(xdm_config_load(&cfg), XDM_E_CONFIG);
	ck_assert_msg(strstr(msg(), "larger than the 1 MiB limit"), "%s", msg());
	ck_assert_ptr_eq(cfg, UNTOUCHED);
	unlink(path);
	free(big);
}
END_TEST

START_TEST(test_load_nul_byte)
{
	static const char text[] = "platform = host\n\0streams = 2\n";
	struct xdm_config *cfg = UNTOUCHED;
	char path[4096];

	write_temp(text, sizeof(text) - 1, path, sizeof(path));
	ck_assert_int_eq(setenv("XDM_CONFIG", path, 1), 0);
	ck_assert_int_eq(xdm_config_load(&cfg), XDM_E_CONFIG);
	ck_assert_msg(strstr(msg(), "NUL byte"), "%s", msg());
	ck_assert_ptr_eq(cfg, UNTOUCHED);
	unlink(path);
}
END_TEST

START_TEST(test_load_without_env)
{
	struct xdm_config *cfg = NULL;

	ck_assert_int_eq(unsetenv("XDM_CONFIG"), 0);
	ck_assert_msg(xdm_config_load(&cfg) == XDM_OK, "%s", msg());
	if (access(XDM_SYSCONF_FILE, F_OK) == 0) {
		/* The machine has a config: it is what gets read. */
		ck_assert_str_eq(cfg->source, XDM_SYSCONF_FILE);
	} else {
		ck_assert_str_eq(cfg->source, "<embedded>");
		ck_assert_str_eq(cfg->text, xdm_config_embedded());
		ck_assert_uint_eq(cfg->nplatforms, 2);
		ck_assert_str_eq(cfg->platforms[0], "cuda");
		ck_assert_str_eq(cfg->platforms[1], "host");
	}
	xdm_config_free(cfg);

	/* An empty XDM_CONFIG is the same as none. */
	ck_assert_int_eq(setenv("XDM_CONFIG", "", 1), 0);
	ck_assert_msg(xdm_config_load(&cfg) == XDM_OK, "%s", msg());
	if (access(XDM_SYSCONF_FILE, F_OK) != 0)
		ck_assert_str_eq(cfg->source, "<embedded>");
	xdm_config_free(cfg);
}
END_TEST

/* ---- xdm_parse_size() ---------------------------------------------------- */

static uint64_t size_ok(const char *text, uint64_t base)
{
	uint64_t v = 12345;
	enum xdm_status st = xdm_parse_size(text, base, &v);

	ck_assert_msg(st == XDM_OK, "'%s' refused: %s", text, msg());
	return v;
}

/* text is refused with INVALID, *out is untouched, the message names it. */
static void size_bad(const char *text, uint64_t base, const char *shown, const char *why)
{
	uint64_t v = 777;
	char want[128];

	xdm_error_clear();
	ck_assert_msg(xdm_parse_size(text, base, &v) == XDM_E_INVALID, "'%s' accepted as %llu",
		      text ? text : "(null)", (unsigned long long)v);
	ck_assert_uint_eq(v, 777);
	ck_assert_int_eq(xdm_last_error()->code, XDM_E_INVALID);
	snprintf(want, sizeof(want), "'%s'", shown);
	ck_assert_msg(strstr(msg(), want), "message '%s' does not name %s", msg(), want);
	if (why)
		ck_assert_msg(strstr(msg(), why), "message '%s' does not say '%s'", msg(), why);
}

/* xdm_uuid_format: the one way a GPU's UUID is written (segment names). */
START_TEST(test_uuid_format)
{
	const unsigned char b[16] = { 0x5f, 0x3c, 0x8b, 0x9e, 0x01, 0xa2, 0xb3, 0xc4,
				      0xd5, 0xe6, 0xf7, 0x08, 0x19, 0x2a, 0x3b, 0xff };
	char out[40], small[9];

	memset(out, 'x', sizeof(out));
	xdm_uuid_format(b, out, sizeof(out));
	ck_assert_str_eq(out, "5f3c8b9e-01a2-b3c4-d5e6-f708192a3bff");
	xdm_uuid_format(b, small, sizeof(small));
	ck_assert_str_eq(small, "5f3c8b9e");
}
END_TEST

START_TEST(test_size_plain)
{
	ck_assert_uint_eq(size_ok("0", 0), 0);
	ck_assert_uint_eq(size_ok("4096", 0), 4096);
	ck_assert_uint_eq(size_ok("007", 0), 7);
	ck_assert_uint_eq(size_ok("512B", 0), 512);
	ck_assert_uint_eq(size_ok("512b", 0), 512);
	ck_assert_uint_eq(size_ok("18446744073709551615", 0), UINT64_MAX);
	ck_assert_uint_eq(size_ok("max", 0), UINT64_MAX);
	ck_assert_uint_eq(size_ok("MAX\n", 0), UINT64_MAX);
	ck_assert_uint_eq(size_ok(" Max ", 0), UINT64_MAX);
}
END_TEST

START_TEST(test_size_suffixes)
{
	ck_assert_uint_eq(size_ok("64K", 0), 64ull << 10);
	ck_assert_uint_eq(size_ok("64k", 0), 64ull << 10);
	ck_assert_uint_eq(size_ok("64KB", 0), 64ull << 10);
	ck_assert_uint_eq(size_ok("64KiB", 0), 64ull << 10);
	ck_assert_uint_eq(size_ok("64kib", 0), 64ull << 10);
	ck_assert_uint_eq(size_ok("3M", 0), 3ull << 20);
	ck_assert_uint_eq(size_ok("3mB", 0), 3ull << 20);
	ck_assert_uint_eq(size_ok("1G", 0), 1ull << 30);
	ck_assert_uint_eq(size_ok("1GB", 0), 1ull << 30);
	ck_assert_uint_eq(size_ok("8gib", 0), 8ull << 30);
	ck_assert_uint_eq(size_ok("2T", 0), 2ull << 40);
	ck_assert_uint_eq(size_ok("2TiB", 0), 2ull << 40);
	ck_assert_uint_eq(size_ok("0G", 0), 0);
}
END_TEST

START_TEST(test_size_fractions)
{
	ck_assert_uint_eq(size_ok("1.5G", 0), 3ull << 29);
	ck_assert_uint_eq(size_ok("0.5K", 0), 512);
	ck_assert_uint_eq(size_ok("1.1K", 0), 1126);		/* 1126.4, rounded down */
	ck_assert_uint_eq(size_ok("0.1G", 0), 107374182);	/* 107374182.4 */
	ck_assert_uint_eq(size_ok("2.25MiB", 0), 2359296);
	ck_assert_uint_eq(size_ok("0.999K", 0), 1022);		/* 1022.976 */
	/* Exactly 1/2^40 of a TiB: floating point would round this away. */
	ck_assert_uint_eq(size_ok("0.0000000000009094947017729282379150390625T", 0), 1);
	ck_assert_uint_eq(size_ok("0.0000000000009094947017729282379150390624T", 0), 0);
	size_bad("1.5", 0, "1.5", "needs a unit");
	size_bad("1.5B", 0, "1.5B", "needs a unit");
	size_bad("1.K", 0, "1.K", NULL);
	size_bad(".5K", 0, ".5K", NULL);
	size_bad("1..5K", 0, "1..5K", NULL);
}
END_TEST

START_TEST(test_size_percent)
{
	ck_assert_uint_eq(size_ok("80%", 1000), 800);
	ck_assert_uint_eq(size_ok("12.5%", 1000), 125);
	ck_assert_uint_eq(size_ok("100%", 1000), 1000);
	ck_assert_uint_eq(size_ok("100.000%", 1000), 1000);
	ck_assert_uint_eq(size_ok("0.001%", 1000000000), 10000);
	ck_assert_uint_eq(size_ok("33.333%", 3), 0);		/* 0.99999 */
	ck_assert_uint_eq(size_ok("1%", 99), 0);
	ck_assert_uint_eq(size_ok("50%", UINT64_MAX), UINT64_MAX / 2);
	ck_assert_uint_eq(size_ok("100%", UINT64_MAX), UINT64_MAX);
	ck_assert_uint_eq(size_ok("99.99%", UINT64_MAX), 18444899399302180659ull);
	ck_assert_uint_eq(size_ok("80%", 80ull << 30), 64ull << 30);
	size_bad("0%", 1000, "0%", "more than 0");
	size_bad("0.000%", 1000, "0.000%", "more than 0");
	size_bad("100.01%", 1000, "100.01%", "at most 100");
	size_bad("101%", 1000, "101%", "at most 100");
	size_bad("99999999999999999999999%", 1000, "99999999999999999999999%", "at most 100");
	size_bad("80%", 0, "80%", "there is none");
	size_bad("%", 1000, "%", NULL);
	size_bad("80%%", 1000, "80%%", NULL);
	size_bad("80 %", 1000, "80 %", NULL);
	size_bad("80%B", 1000, "80%B", NULL);
}
END_TEST

START_TEST(test_size_whitespace)
{
	ck_assert_uint_eq(size_ok("8G\n", 0), 8ull << 30);
	ck_assert_uint_eq(size_ok("  8G  ", 0), 8ull << 30);
	ck_assert_uint_eq(size_ok("\t8G \n", 0), 8ull << 30);
	ck_assert_uint_eq(size_ok("50%\n", 4), 2);
	size_bad("8 G", 0, "8 G", "unexpected text");
	size_bad("8G\n\n", 0, "8G?", NULL);
	size_bad("\n8G", 0, "?8G", NULL);
	size_bad("8G\nx", 0, "8G?x", NULL);
	size_bad("1 024", 0, "1 024", NULL);
}
END_TEST

START_TEST(test_size_overflow)
{
	ck_assert_uint_eq(size_ok("16777215T", 0), UINT64_MAX - (1ull << 40) + 1);
	ck_assert_uint_eq(size_ok("16777215.99999999999999999999T", 0), UINT64_MAX);
	size_bad("16777216T", 0, "16777216T", "larger than 2^64 - 1");
	size_bad("18446744073709551616", 0, "18446744073709551616", "larger than");
	size_bad("99999999999999999999999999K", 0, "99999999999999999999999999K", "larger");
	size_bad("17179869184G", 0, "17179869184G", "larger");
}
END_TEST

START_TEST(test_size_garbage)
{
	size_bad("", 0, "", "empty");
	size_bad("   ", 0, "   ", "empty");
	size_bad("\n", 0, "", "empty");
	size_bad("abc", 0, "abc", NULL);
	size_bad("-1", 0, "-1", "negative");
	size_bad("-1G", 0, "-1G", "negative");
	size_bad("+1", 0, "+1", NULL);
	size_bad("8Gx", 0, "8Gx", "unexpected text");
	size_bad("8GiBx", 0, "8GiBx", NULL);
	size_bad("8GiBB", 0, "8GiBB", NULL);
	size_bad("8iB", 0, "8iB", NULL);
	size_bad("8Q", 0, "8Q", NULL);
	size_bad("1e3", 0, "1e3", NULL);
	size_bad("0x10", 0, "0x10", NULL);
	size_bad("K", 0, "K", NULL);
	size_bad("maximum", 0, "maximum", NULL);
	size_bad("8KM", 0, "8KM", NULL);
	ck_assert_int_eq(xdm_parse_size(NULL, 0, &(uint64_t){ 0 }), XDM_E_INVALID);
	ck_assert_int_eq(xdm_parse_size("1", 0, NULL), XDM_E_INVALID);
}
END_TEST

START_TEST(test_size_message_is_bounded)
{
	char text[300], shown[64];

	memset(text, '9', sizeof(text) - 2);
	text[sizeof(text) - 2] = 'x';
	text[sizeof(text) - 1] = '\0';
	/* The message shows the first 48 bytes and "...", not all 299. */
	memset(shown, '9', 48);
	strcpy(shown + 48, "...");
	size_bad(text, 0, shown, NULL);
}
END_TEST

static Suite *config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *good = tcase_create("parse");
	TCase *errors = tcase_create("errors");
	TCase *load = tcase_create("load");
	TCase *size = tcase_create("size");

	tcase_add_test(good, test_empty_text_gets_defaults);
	tcase_add_test(good, test_globals);
	tcase_add_test(good, test_ipc_allow);
	tcase_add_test(good, test_ipc_allow_bounds);
	tcase_add_test(good, test_platform_parameters);
	tcase_add_test(good, test_platform_list_of_a_caller);
	tcase_add_test(good, test_comments_blank_lines_crlf);
	tcase_add_test(good, test_full_example);
	tcase_add_test(good, test_stack_params_and_spacing);
	tcase_add_test(good, test_quoted_values);
	tcase_add_test(good, test_continuation_lines);
	tcase_add_test(good, test_device_lookup_precedence);
	tcase_add_test(good, test_parse_stack_alone);
	tcase_add_test(good, test_parse_stack_alone_errors);
	tcase_add_test(good, test_embedded_default);
	suite_add_tcase(s, good);

	tcase_add_test(errors, test_err_format_exact);
	tcase_add_test(errors, test_err_unknown_keys);
	tcase_add_test(errors, test_err_key_in_wrong_scope);
	tcase_add_test(errors, test_err_duplicates);
	tcase_add_test(errors, test_err_section_headers);
	tcase_add_test(errors, test_err_missing_equals_and_empty_values);
	tcase_add_test(errors, test_err_streams);
	tcase_add_test(errors, test_err_values_with_junk);
	tcase_add_test(errors, test_err_empty_layers);
	tcase_add_test(errors, test_err_module_names);
	tcase_add_test(errors, test_err_params);
	tcase_add_test(errors, test_err_quotes);
	tcase_add_test(errors, test_err_positions_after_continuation);
	tcase_add_test(errors, test_err_long_token_truncated);
	tcase_add_test(errors, test_err_control_chars_in_token);
	suite_add_tcase(s, errors);

	tcase_add_test(load, test_load_from_env);
	tcase_add_test(load, test_load_env_missing_file);
	tcase_add_test(load, test_load_env_directory);
	tcase_add_test(load, test_load_env_parse_error_names_file);
	tcase_add_test(load, test_load_size_limit);
	tcase_add_test(load, test_load_nul_byte);
	tcase_add_test(load, test_load_without_env);
	tcase_add_test(load, test_sample_config_parses);
	suite_add_tcase(s, load);

	tcase_add_test(size, test_uuid_format);
	tcase_add_test(size, test_size_plain);
	tcase_add_test(size, test_size_suffixes);
	tcase_add_test(size, test_size_fractions);
	tcase_add_test(size, test_size_percent);
	tcase_add_test(size, test_size_whitespace);
	tcase_add_test(size, test_size_overflow);
	tcase_add_test(size, test_size_garbage);
	tcase_add_test(size, test_size_message_is_bounded);
	suite_add_tcase(s, size);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(config_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
