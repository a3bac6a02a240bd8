/* SPDX-License-Identifier: MIT */
/*
 * check_cuda_absent.c - the cuda module where CUDA may be missing.
 *
 * This suite runs in every CI job.  Each case first finds out what this
 * machine has, the way the platform will: whether libcuda.so.1 opens, and
 * whether cuInit and cuDeviceGetCount then report a device.  Without a
 * driver or a device it checks the sentences the cuda platform fails with,
 * the refusal of cuda_direct, cuda_async and cuda_vmm over the host platform,
 * and the
 * configured fall back to host.  On a GPU machine the same cases check
 * instead what the platform reports and what the backends do.
 *
 * The probe runs inside each case, that is inside check's forked child:
 * a parent that had called cuInit would hand its children a CUDA state
 * that is not usable after fork.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include <xdm/module.h>

#include "tests/lib/testutil.h"

enum presence {
	NO_DRIVER,	/* libcuda.so.1 does not open */
	NO_DEVICE,	/* it opens, but cuInit fails or sees no device */
	GPU,
};

/* What this machine has; with a GPU, *devices is how many the driver sees. */
static enum presence probe_devices(int *devices)
{
	CUresult (*init)(unsigned int flags);
	CUresult (*count)(int *n);
	void *dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	int n = 0;

	*devices = 0;
	if (!dl)
		return NO_DRIVER;
	/* Neither has a versioned ABI, so dlsym by the plain name is right.
	 * The library stays open: cuInit may have started threads in it. */
	*(void **)&init = dlsym(dl, "cuInit");
	*(void **)&count = dlsym(dl, "cuDeviceGetCount");
	ck_assert_msg(init && count, "libcuda.so.1 lacks cuInit or cuDeviceGetCount");
	if (init(0) != CUDA_SUCCESS || count(&n) != CUDA_SUCCESS || n < 1)
		return NO_DEVICE;
	*devices = n;
	return GPU;
}

static enum presence probe(void)
{
	int n;

	return probe_devices(&n);
}

static const char *message(void)
{
	return xdm_last_error_message();
}

#define HAS(text) ck_assert_msg(strstr(message(), (text)) != NULL, \
				"expected \"%s\" in: %s", (text), message())

/* The sentence the platform must fail with on this machine. */
static void expect_absent(enum presence have, enum xdm_status st)
{
	ck_assert_msg(st == XDM_E_NO_DEVICE, "%s: %s", xdm_strerror(st), message());
	ck_assert_int_eq(xdm_last_error()->code, XDM_E_NO_DEVICE);
	if (have == NO_DRIVER) {
		HAS("no CUDA driver: dlopen libcuda.so.1 failed: ");
		HAS("libcuda.so.1");
	} else {
		HAS("no CUDA device");
	}
}

/* A config file in XDM_CONFIG for one case; the suite's own comes back. */
struct temp_config {
	char *path;
	char *saved;		/* XDM_CONFIG before, or NULL */
};

static void use_config(struct temp_config *c, const char *text)
{
	const char *old = getenv("XDM_CONFIG");

	c->saved = old ? strdup(old) : NULL;
	c->path = tu_write_temp(text);
	ck_assert_int_eq(setenv("XDM_CONFIG", c->path, 1), 0);
}

static void drop_config(struct temp_config *c)
{
	if (c->saved)
		setenv("XDM_CONFIG", c->saved, 1);
	else
		unsetenv("XDM_CONFIG");
	unlink(c->path);
	free(c->path);
	free(c->saved);
}

static bool is_uuid(const char *s)
{
	if (strlen(s) != 36)
		return false;
	for (int i = 0; i < 36; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;

		if (dash ? s[i] != '-' : !strchr("0123456789abcdef", s[i]))
			return false;
	}
	return true;
}

/* ---- the platform ---------------------------------------------------- */

START_TEST(test_platform_fails_or_describes_the_gpu)
{
	enum presence have = probe();
	struct xdm_runtime *rt = NULL;
	struct xdm_device_info dev;
	enum xdm_status st;

	st = xdm_runtime_create(0, "cuda", "cuda_async", &rt);
	if (have != GPU) {
		expect_absent(have, st);
		ck_assert_ptr_null(rt);
		return;
	}
	ck_assert_msg(st == XDM_OK, "%s: %s", xdm_strerror(st), message());
	TU_OK(xdm_runtime_device(rt, &dev));
	ck_assert_str_eq(dev.platform, "cuda");
	ck_assert_uint_gt(strlen(dev.name), 0);
	ck_assert_msg(is_uuid(dev.uuid), "uuid '%s' is not 8-4-4-4-12 lowercase hex", dev.uuid);
	ck_assert_uint_gt(dev.total_bytes, 0);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(test_no_device_past_the_last_ordinal)
{
	enum presence have = probe();
	struct xdm_runtime *rt = NULL;
	enum xdm_status st;

	/* No machine has this many GPUs: the refusal applies everywhere. */
	st = xdm_runtime_create(XDM_MAX_DEVICES - 1, "cuda", "cuda_direct", &rt);
	expect_absent(have, st);
	if (have == GPU)
		HAS("the driver sees");
	ck_assert_ptr_null(rt);
}
END_TEST

/* ---- the backends over another platform ------------------------------ */

START_TEST(test_backends_need_the_cuda_platform)
{
	static const char *const backends[] = { "cuda_direct", "cuda_async", "cuda_vmm" };
	struct xdm_runtime *rt = NULL;
	char want[128];

	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(xdm_runtime_create(0, "host", backends[i], &rt), XDM_E_CONFIG);
		ck_assert_ptr_null(rt);
		snprintf(want, sizeof(want), "<stack>:1:1: %s needs the cuda platform, not 'host'",
			 backends[i]);
		HAS(want);
	}
}
END_TEST

/* ---- the configured preference list ---------------------------------- */

START_TEST(test_config_falls_back_to_host)
{
	enum presence have = probe();
	struct xdm_runtime *rt = NULL;
	struct temp_config cfg;
	struct xdm_device_info dev;
	char spec[64];

	use_config(&cfg, "platform = cuda, host\n");
	TU_OK(xdm_runtime_create(0, NULL, NULL, &rt));
	TU_OK(xdm_runtime_device(rt, &dev));
	TU_OK(xdm_runtime_stack_spec(rt, spec, sizeof(spec)));
	if (have == GPU) {
		ck_assert_str_eq(dev.platform, "cuda");
		ck_assert_str_eq(spec, "pool | cuda_vmm");
	} else {
		ck_assert_str_eq(dev.platform, "host");
		ck_assert_str_eq(spec, "pool | host");
	}
	TU_OK(xdm_runtime_destroy(rt));
	drop_config(&cfg);
}
END_TEST

START_TEST(test_config_cuda_alone_names_the_line)
{
	enum presence have = probe();
	struct xdm_runtime *rt = NULL;
	struct temp_config cfg;
	enum xdm_status st;
	char want[512];

	use_config(&cfg, "# only the GPU will do\nplatform = cuda\n");
	st = xdm_runtime_create(0, NULL, NULL, &rt);
	if (have == GPU) {
		char spec[64];

		ck_assert_msg(st == XDM_OK, "%s: %s", xdm_strerror(st), message());
		TU_OK(xdm_runtime_stack_spec(rt, spec, sizeof(spec)));
		ck_assert_str_eq(spec, "pool | cuda_vmm");
		TU_OK(xdm_runtime_destroy(rt));
	} else {
		expect_absent(have, st);
		ck_assert_ptr_null(rt);
		/* The position of the value on the platform line comes first. */
		snprintf(want, sizeof(want), "%s:2:12: no CUDA %s", cfg.path,
			 have == NO_DRIVER ? "driver" : "device");
		ck_assert_msg(strncmp(message(), want, strlen(want)) == 0,
			      "expected \"%s...\", got: %s", want, message());
	}
	drop_config(&cfg);
}
END_TEST

/* ---- the module's tables --------------------------------------------- */

static void *module;
static const struct xdm_ops *platform_ops, *direct_ops, *async_ops, *vmm_ops;

static void module_setup(void)
{
	const struct xdm_ops *const *tables;
	int count;

	/* Loading must work without a driver: nothing runs until init. */
	tables = tu_module_open("backends", "cuda", &module, &count);
	ck_assert_int_eq(count, 4);
	platform_ops = tu_module_table(tables, XDM_KIND_PLATFORM, "cuda");
	direct_ops = tu_module_table(tables, XDM_KIND_BACKEND, "cuda_direct");
	async_ops = tu_module_table(tables, XDM_KIND_BACKEND, "cuda_async");
	vmm_ops = tu_module_table(tables, XDM_KIND_BACKEND, "cuda_vmm");
}

static void module_teardown(void)
{
	tu_module_close(&module);
}

START_TEST(test_module_tables)
{
	static const char *const async_params[] = {
		"pool", "release_threshold", "reuse_follow_event_dependencies",
		"reuse_allow_opportunistic", "reuse_allow_internal_dependencies", "peers", "ipc",
	};
	static const char *const vmm_attrs[] = {
		"granule", "reserved_va", "mapped", "mapped_peak", "releasing", "maps", "releases",
		"peers", "peers_skipped", "ipc",
	};
	const struct xdm_ops *t[] = { platform_ops, direct_ops, async_ops, vmm_ops };
	const struct xdm_param_spec *ps;
	const struct xdm_attr *a;
	int n;

	for (int i = 0; i < 4; i++) {
		ck_assert_uint_eq(t[i]->abi_major, XDM_ABI_MAJOR);
		ck_assert_uint_eq(t[i]->size, sizeof(struct xdm_ops));
		ck_assert_ptr_nonnull(t[i]->init);
		ck_assert_ptr_nonnull(t[i]->fini);
	}
	ck_assert_int_eq(platform_ops->kind, XDM_KIND_PLATFORM);
	ck_assert_str_eq(platform_ops->default_stack, "pool | cuda_vmm");
	ck_assert_ptr_nonnull(platform_ops->memcpy_async);
	ck_assert_int_eq(direct_ops->kind, XDM_KIND_BACKEND);
	ck_assert_int_eq(async_ops->kind, XDM_KIND_BACKEND);

	/* cuda_direct frees synchronously and tracks nothing: the core must
	 * refuse its tracking calls, so the methods are absent. */
	ck_assert_ptr_null(direct_ops->record_block_use);
	ck_assert_ptr_null(direct_ops->supports_block_use_tracking);
	ck_assert_ptr_null(direct_ops->prepare_block_use);
	ck_assert_ptr_null(direct_ops->finish_block_use);
	/* cuda_async frees on the block's stream and uses the core's. */
	ck_assert(async_ops->record_block_use == xdm_track_record);
	ck_assert(async_ops->supports_block_use_tracking == xdm_track_supported);
	ck_assert(async_ops->prepare_block_use == xdm_track_prepare);
	ck_assert(async_ops->finish_block_use == xdm_track_finish);
	ck_assert_ptr_nonnull(async_ops->reap_pending);

	for (n = 0, ps = async_ops->params; ps && ps->name; ps++, n++)
		ck_assert_str_eq(ps->name, async_params[n]);
	ck_assert_int_eq(n, 7);
	ck_assert_str_eq(async_ops->params[0].default_value, "default");
	ck_assert_str_eq(async_ops->params[1].default_value, "max");
	ck_assert_str_eq(async_ops->params[5].default_value, "none");
	/* An exportable pool is asked for: a graph capture cannot allocate from one. */
	ck_assert_int_eq(async_ops->params[6].type, XDM_PARAM_BOOL);
	ck_assert_str_eq(async_ops->params[6].default_value, "false");
	/* All read-only but peers, which a write adds grants to. */
	for (n = 0, a = async_ops->attrs; a && a->name; a++, n++) {
		bool peers = !strcmp(a->name, "peers");

		ck_assert_uint_eq(a->mode, peers ? 0644 : 0444);
		ck_assert(peers ? a->store != NULL : a->store == NULL);
	}
	ck_assert_int_eq(n, 7);
	/* peers= is left out of cuda_direct (see xdm-cuda(7)): no parameters. */
	ck_assert_ptr_null(direct_ops->params);
	for (n = 0, a = direct_ops->attrs; a && a->name; a++, n++)
		ck_assert_uint_eq(a->mode, 0444);
	ck_assert_int_eq(n, 3);

	/* cuda_vmm: stream-ordered releases, so the core's tracking; the
	 * granule methods of ABI 1.3, which the other two leave out. */
	ck_assert_int_eq(vmm_ops->kind, XDM_KIND_BACKEND);
	ck_assert_uint_ge(vmm_ops->abi_minor, 3);
	ck_assert(vmm_ops->record_block_use == xdm_track_record);
	ck_assert(vmm_ops->supports_block_use_tracking == xdm_track_supported);
	ck_assert(vmm_ops->prepare_block_use == xdm_track_prepare);
	ck_assert(vmm_ops->finish_block_use == xdm_track_finish);
	ck_assert_ptr_nonnull(vmm_ops->reap_pending);
	ck_assert_ptr_nonnull(vmm_ops->granularity);
	ck_assert_ptr_nonnull(vmm_ops->allocate_at);
	ck_assert_ptr_null(direct_ops->granularity);
	ck_assert_ptr_null(async_ops->granularity);
	ck_assert_ptr_null(direct_ops->allocate_at);
	ck_assert_ptr_null(async_ops->allocate_at);
	ck_assert_str_eq(vmm_ops->params[0].name, "reserve");
	ck_assert_int_eq(vmm_ops->params[0].type, XDM_PARAM_SIZE);
	/* Twice the device's memory is no percentage the parser takes. */
	ck_assert_ptr_null(vmm_ops->params[0].default_value);
	ck_assert_str_eq(vmm_ops->params[1].name, "peers");
	ck_assert_int_eq(vmm_ops->params[1].type, XDM_PARAM_STRING);
	ck_assert_str_eq(vmm_ops->params[1].default_value, "none");
	ck_assert_str_eq(vmm_ops->params[2].name, "ipc");
	ck_assert_str_eq(vmm_ops->params[2].default_value, "auto");
	ck_assert_ptr_null(vmm_ops->params[3].name);
	/* Every backend shares its blocks, and the platform maps what others share. */
	ck_assert_ptr_nonnull(direct_ops->ipc_export);
	ck_assert_ptr_nonnull(async_ops->ipc_export);
	ck_assert_ptr_nonnull(vmm_ops->ipc_export);
	ck_assert_ptr_nonnull(platform_ops->ipc_import);
	ck_assert_ptr_nonnull(platform_ops->ipc_unmap);
	for (n = 0, a = vmm_ops->attrs; a && a->name; a++, n++) {
		bool peers = !strcmp(a->name, "peers");

		ck_assert_str_eq(a->name, vmm_attrs[n]);
		ck_assert_uint_eq(a->mode, peers ? 0644 : 0444);
		ck_assert_ptr_nonnull(a->show);
		ck_assert(peers ? a->store != NULL : a->store == NULL);
	}
	ck_assert_int_eq(n, 10);
}
END_TEST

START_TEST(test_module_exports_only_entry)
{
	static const char *const hidden[] = {
		"cuda_platform_ops", "cuda_direct_ops", "cuda_async_ops", "cuda_driver_open",
		"cuda_fail", "cuda_platform_of", "cuda_stream_create", "cuda_show_u64",
		"cuda_vmm_ops", "cuda_vmm_map", "cuda_vmm_reap", "cuda_vmm_attrs", "vrange_init",
		"vrange_find", "cuda_peers_parse", "cuda_peers_resolve", "cuda_peers_show",
		"cuda_peers_grant_init",
	};

	for (size_t i = 0; i < sizeof(hidden) / sizeof(hidden[0]); i++)
		ck_assert_msg(dlsym(module, hidden[i]) == NULL, "cuda.so exports %s", hidden[i]);
}
END_TEST

/* ---- the backends on a GPU ------------------------------------------- */

START_TEST(test_tracking_support)
{
	enum presence have = probe();
	struct xdm_runtime *direct = NULL, *async = NULL, *vmm = NULL;
	struct xdm_block b;

	if (have != GPU) {
		expect_absent(have, xdm_runtime_create(0, "cuda", "cuda_direct", &direct));
		expect_absent(have, xdm_runtime_create(0, "cuda", "cuda_async", &async));
		expect_absent(have, xdm_runtime_create(0, "cuda", "cuda_vmm", &vmm));
		expect_absent(have, xdm_runtime_create(0, "cuda", "pool | cuda_vmm reserve=1G",
						       &vmm));
		ck_assert_ptr_null(direct);
		ck_assert_ptr_null(async);
		ck_assert_ptr_null(vmm);
		return;
	}
	TU_OK(xdm_runtime_create(0, "cuda", "cuda_vmm reserve=1G", &vmm));
	ck_assert(xdm_supports_block_use_tracking(vmm));
	TU_OK(xdm_runtime_destroy(vmm));
	TU_OK(xdm_runtime_create(0, "cuda", "cuda_direct", &direct));
	TU_OK(xdm_runtime_create(0, "cuda", "cuda_async", &async));
	ck_assert(!xdm_supports_block_use_tracking(direct));
	ck_assert(xdm_supports_block_use_tracking(async));

	TU_OK(xdm_allocate(direct, 4096, 0, "untracked", &b));
	ck_assert_int_eq(xdm_prepare_block_use(direct, xdm_block_id_of(&b), 1, XDM_ACCESS_READ),
			 XDM_E_STREAM_MISUSE);
	ck_assert_int_eq(xdm_record_block_use(direct, &b, 1), XDM_E_STREAM_MISUSE);
	TU_OK(xdm_deallocate(direct, &b));

	TU_OK(xdm_allocate(async, 4096, 0, "tracked", &b));
	TU_OK(xdm_prepare_block_use(async, xdm_block_id_of(&b), 1, XDM_ACCESS_WRITE));
	TU_OK(xdm_finish_block_use(async, xdm_block_id_of(&b), 1, XDM_ACCESS_WRITE));
	TU_OK(xdm_deallocate(async, &b));
	ck_assert_int_eq(b.state, XDM_BLOCK_RETIRED);

	TU_OK(xdm_runtime_destroy(direct));
	TU_OK(xdm_runtime_destroy(async));
}
END_TEST

static void expect_attr(struct xdm_runtime *rt, const char *attr, const char *value)
{
	char buf[64];

	TU_OK(xdm_layer_attr_show(rt, 0, attr, buf, sizeof(buf)));
	ck_assert_str_eq(buf, value);
}

START_TEST(test_backends_allocate_and_account)
{
	static const char *const backends[] = { "cuda_direct", "cuda_async" };
	enum presence have = probe();
	struct xdm_runtime *rt = NULL;
	struct xdm_device_info dev;
	struct xdm_block b[4], huge;
	enum xdm_status st;

	if (have != GPU) {
		expect_absent(have, xdm_runtime_create(0, "cuda", "cuda_async pool=own", &rt));
		ck_assert_ptr_null(rt);
		return;
	}
	for (int k = 0; k < 2; k++) {
		TU_OK(xdm_runtime_create(0, "cuda", backends[k], &rt));
		TU_OK(xdm_runtime_device(rt, &dev));
		for (int i = 0; i < 4; i++) {
			TU_OK(xdm_allocate(rt, 1000 + (size_t)i, (xdm_stream_id)i, "t", &b[i]));
			ck_assert_uint_ne(b[i].ptr, 0);
			ck_assert_uint_eq(b[i].ptr % XDM_DEFAULT_ALIGN, 0);
			ck_assert_uint_eq(b[i].stream, (xdm_stream_id)i);
		}
		ck_assert_uint_eq(xdm_bytes_outstanding(rt), 4006);
		expect_attr(rt, "bytes_outstanding", "4006\n");

		/* More than the card has: the driver's own error, nothing kept.
		 * cuMemAlloc's is documented as OUT_OF_MEMORY; a pool may
		 * refuse the size itself first. */
		st = xdm_allocate(rt, (size_t)dev.total_bytes * 2, 0, "huge", &huge);
		ck_assert_msg(st == XDM_E_DRIVER, "%s: %s", xdm_strerror(st), message());
		HAS("CUDA_ERROR_");
		if (k == 0) {
			ck_assert_int_eq(xdm_last_error()->driver_code, CUDA_ERROR_OUT_OF_MEMORY);
			HAS("cuMemAlloc(");
			HAS("CUDA_ERROR_OUT_OF_MEMORY");
		}
		ck_assert_uint_eq(xdm_bytes_outstanding(rt), 4006);

		for (int i = 0; i < 4; i++)
			TU_OK(xdm_deallocate(rt, &b[i]));
		TU_OK(xdm_reap_pending(rt));
		ck_assert_uint_eq(xdm_bytes_outstanding(rt), 0);
		expect_attr(rt, "bytes_outstanding", "0\n");
		if (k == 1)
			expect_attr(rt, "bytes_pending_free", "0\n");
		TU_OK(xdm_runtime_destroy(rt));
		rt = NULL;
	}

	TU_OK(xdm_runtime_create(0, "cuda", "cuda_async pool=own release_threshold=0", &rt));
	expect_attr(rt, "release_threshold", "0\n");
	TU_OK(xdm_runtime_destroy(rt));
	rt = NULL;
	ck_assert_int_eq(xdm_runtime_create(0, "cuda", "cuda_async pool=mine", &rt),
			 XDM_E_CONFIG);
	HAS("pool must be 'default' or 'own'");
	ck_assert_ptr_null(rt);
}
END_TEST

/* ---- peers= --------------------------------------------------------- */

/*
 * Over the host platform, so on every machine: the value is read before
 * the layer asks for the cuda platform, and a bad one is the error.
 */
START_TEST(test_peers_refused_before_the_driver)
{
	static const char *const layers[] = { "cuda_async", "cuda_vmm" };
	char stack[64], want[160];

	for (int i = 0; i < 2; i++) {
		snprintf(stack, sizeof(stack), "%s peers=bogus", layers[i]);
		snprintf(want, sizeof(want), "%s: peers='bogus' must be 'none', 'all' or device "
			 "ordinals separated by commas (like 1,2)", layers[i]);
		tu_expect_config_error("host", stack, want);
		/* Quoted or not, the tokenizer refuses an empty value first. */
		snprintf(stack, sizeof(stack), "%s peers=\"\"", layers[i]);
		tu_expect_config_error("host", stack, "empty value");
		snprintf(stack, sizeof(stack), "%s peers=1,1", layers[i]);
		tu_expect_config_error("host", stack, "device 1 is named twice");
		snprintf(stack, sizeof(stack), "%s peers=1,", layers[i]);
		tu_expect_config_error("host", stack, "peers='1,'");
		snprintf(stack, sizeof(stack), "%s peers=64", layers[i]);
		tu_expect_config_error("host", stack, "device 64 is past the largest ordinal");
		/* A good value goes on to the platform check. */
		snprintf(stack, sizeof(stack), "%s peers=1,2", layers[i]);
		snprintf(want, sizeof(want), "%s needs the cuda platform, not 'host'", layers[i]);
		tu_expect_config_error("host", stack, want);
	}
	/* The stack tokenizer refuses a key with nothing after the '='. */
	tu_expect_config_error("host", "cuda_async peers=", "empty value for the parameter");
	tu_expect_config_error("host", "pool | cuda_vmm peers= reserve=1G",
			       "empty value for the parameter");
	/* A grant on the process's default pool is refused, by name. */
	tu_expect_config_error("host", "cuda_async pool=default peers=all",
			       "cuda_async: peers=all needs a pool of the layer's own, not "
			       "pool=default");
	tu_expect_config_error("host", "cuda_async pool=own peers=all",
			       "cuda_async needs the cuda platform");
	/* cuda_direct has no peers= at all. */
	tu_expect_config_error("host", "cuda_direct peers=all",
			       "'cuda_direct' has no parameter 'peers'");
}
END_TEST

/* ---- ipc= ----------------------------------------------------------- */

/* Read before the driver too, on every machine. */
START_TEST(test_ipc_refused_before_the_driver)
{
	tu_expect_config_error("host", "cuda_vmm ipc=maybe",
			       "cuda_vmm: ipc must be 'auto', 'true' or 'false', not 'maybe'");
	tu_expect_config_error("host", "cuda_vmm ipc=true", "cuda_vmm needs the cuda platform");
	/* The device's default pool cannot be made exportable. */
	tu_expect_config_error("host", "cuda_async pool=default ipc=true",
			       "cuda_async: ipc=true needs a pool of the layer's own, not "
			       "pool=default");
	tu_expect_config_error("host", "cuda_async ipc=true",
			       "cuda_async needs the cuda platform");
	tu_expect_config_error("host", "cuda_direct ipc=true",
			       "'cuda_direct' has no parameter 'ipc'");
}
END_TEST

static void expect_peers(struct xdm_runtime *rt, uint32_t layer, const char *granted,
			 const char *skipped)
{
	char buf[256];

	TU_OK(xdm_layer_attr_show(rt, layer, "peers", buf, sizeof(buf)));
	if (granted)
		ck_assert_str_eq(buf, granted);
	else
		ck_assert_msg(buf[strlen(buf) - 1] == '\n', "peers is no line: '%s'", buf);
	TU_OK(xdm_layer_attr_show(rt, layer, "peers_skipped", buf, sizeof(buf)));
	if (skipped)
		ck_assert_str_eq(buf, skipped);
	else
		ck_assert_msg(buf[strlen(buf) - 1] == '\n', "peers_skipped is no line: '%s'", buf);
}

/*
 * On a GPU, the checks that need only one: its own ordinal and one past the
 * last are refused by name, and peers=all on one GPU grants nothing.  Two
 * GPUs and the grant itself are tests/gpu/check_peer_cuda.c's.
 */
START_TEST(test_peers_on_this_machine)
{
	static const char *const stacks[] = {
		"cuda_async peers=all", "pool | cuda_async peers=all",
		"cuda_vmm reserve=1G peers=all", "pool | cuda_vmm reserve=1G peers=all",
	};
	struct xdm_runtime *rt = NULL;
	enum presence have;
	char stack[64], want[128];
	int n;

	have = probe_devices(&n);
	if (have != GPU) {
		expect_absent(have, xdm_runtime_create(0, "cuda", "cuda_async peers=all", &rt));
		expect_absent(have, xdm_runtime_create(0, "cuda", "cuda_vmm peers=all", &rt));
		ck_assert_ptr_null(rt);
		return;
	}
	tu_expect_config_error("cuda", "cuda_direct peers=all",
			       "'cuda_direct' has no parameter 'peers'");
	tu_expect_config_error("cuda", "cuda_async peers=0",
			       "cuda_async: peers names device 0, which is the layer's own device");
	tu_expect_config_error("cuda", "cuda_vmm reserve=1G peers=0",
			       "cuda_vmm: peers names device 0, which is the layer's own device");
	if (n < 64) {
		snprintf(stack, sizeof(stack), "cuda_async peers=%d", n);
		snprintf(want, sizeof(want), "peers names device %d, which this process does not "
			 "have: it sees %d CUDA device", n, n);
		tu_expect_config_error("cuda", stack, want);
		snprintf(stack, sizeof(stack), "cuda_vmm reserve=1G peers=%d", n);
		tu_expect_config_error("cuda", stack, want);
	}
	for (int i = 0; i < 4; i++) {
		uint32_t layer = strncmp(stacks[i], "pool", 4) == 0;

		TU_OK(xdm_runtime_create(0, "cuda", stacks[i], &rt));
		expect_peers(rt, layer, n == 1 ? "\n" : NULL, n == 1 ? "\n" : NULL);
		TU_OK(xdm_runtime_destroy(rt));
	}
	TU_OK(xdm_runtime_create(0, "cuda", "cuda_async", &rt));
	expect_peers(rt, 0, "\n", "\n");
	TU_OK(xdm_runtime_destroy(rt));
	TU_OK(xdm_runtime_create(0, "cuda", "cuda_vmm reserve=1G", &rt));
	expect_peers(rt, 0, "\n", "\n");
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

static Suite *cuda_absent_suite(void)
{
	Suite *s = suite_create("cuda_absent");
	TCase *tc;

	tc = tcase_create("platform");
	tcase_add_test(tc, test_platform_fails_or_describes_the_gpu);
	tcase_add_test(tc, test_no_device_past_the_last_ordinal);
	tcase_add_test(tc, test_backends_need_the_cuda_platform);
	tcase_add_test(tc, test_config_falls_back_to_host);
	tcase_add_test(tc, test_config_cuda_alone_names_the_line);
	tcase_add_test(tc, test_tracking_support);
	tcase_add_test(tc, test_backends_allocate_and_account);
	suite_add_tcase(s, tc);

	tc = tcase_create("peers");
	tcase_add_test(tc, test_peers_refused_before_the_driver);
	tcase_add_test(tc, test_ipc_refused_before_the_driver);
	tcase_add_test(tc, test_peers_on_this_machine);
	suite_add_tcase(s, tc);

	/* Outside `make check` there is no built module to open. */
	if (getenv("XDM_TOP_BUILDDIR")) {
		tc = tcase_create("module");
		tcase_add_checked_fixture(tc, module_setup, module_teardown);
		tcase_add_test(tc, test_module_tables);
		tcase_add_test(tc, test_module_exports_only_entry);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(void)
{
	return tu_run_suite(cuda_absent_suite());
}
