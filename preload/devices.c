/* SPDX-License-Identifier: MIT */
/*
 * devices.c - the budget of each device the program allocates on.
 *
 * A device is attached to its budget segment the first time the program
 * allocates on it (or asks cuMemGetInfo there), as a budget layer of xdm
 * would attach: the segment named by the device's UUID (so the order of
 * CUDA_VISIBLE_DEVICES changes nothing), in $XDM_BUDGET_DIR, else the
 * budget directory the users of the machine share where it exists, else
 * /dev/shm (budget_default_dir), in the group of $XDM_BUDGET_GROUP or of
 * the limit a GPU-sharing scheduler injected (scheduler_env.c).  The
 * process gets a slot marked BUDGET_SLOT_PRELOAD; if xdm's own budget
 * layer attaches in the same process, both charge that one slot.
 *
 * Charging is lib/budget_segment's, as a budget layer's: each thread
 * draws credit ahead from the segment ($XDM_PRELOAD_CREDIT, auto by
 * default, as the budget's credit=) and most allocations and frees are
 * served by the thread's own credit, with no atomic read-modify-write and
 * no shared cache line.  The process-local mutex below is taken only to
 * attach, once per device.
 *
 * An attach that fails (a segment of another user, a bad XDM_PRELOAD_LIMIT)
 * is said once on stderr, and then $XDM_PRELOAD_FAIL decides: closed (the
 * default) refuses every allocation on that device, so that a budget that
 * cannot be kept is not silently ignored; open lets the program allocate
 * uncounted.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload/preload.h"

static struct preload_device devices[PRELOAD_DEVICES];
static pthread_mutex_t attach_lock = PTHREAD_MUTEX_INITIALIZER;

unsigned int preload_device_index(const struct preload_device *d)
{
	return (unsigned int)(d - devices);
}

struct preload_device *preload_device_at(unsigned int index)
{
	return index < PRELOAD_DEVICES ? &devices[index] : NULL;
}

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

/* What the driver says of the device: its UUID and its memory. */
static enum xdm_status describe(struct budget_member *m, int ordinal)
{
	cu_device_get_uuid_fn get_uuid = (cu_device_get_uuid_fn)preload_driver_symbol(
		"cuDeviceGetUuid_v2");
	cu_device_total_mem_fn total_mem = (cu_device_total_mem_fn)preload_driver_symbol(
		"cuDeviceTotalMem_v2");
	size_t total = 0;
	CUuuid uuid;
	CUresult rc;

	if (!get_uuid)
		get_uuid = (cu_device_get_uuid_fn)preload_driver_symbol("cuDeviceGetUuid");
	if (!get_uuid || !total_mem)
		return xdm_error_set(XDM_E_NO_DEVICE, PRELOAD_WHO ": the driver has no "
				     "cuDeviceGetUuid or cuDeviceTotalMem_v2");
	rc = get_uuid(&uuid, ordinal);
	if (rc == CUDA_SUCCESS)
		rc = total_mem(&total, ordinal);
	if (rc != CUDA_SUCCESS)
		return xdm_error_set_driver(rc, PRELOAD_WHO ": the driver cannot describe "
					    "device %d (error %d)", ordinal, rc);
	xdm_uuid_format((const unsigned char *)uuid.bytes, m->uuid, sizeof(m->uuid));
	m->device_total = total;
	return XDM_OK;
}

/* The environment's budget, as a budget layer's parameters (xdm-preload(7)). */
static enum xdm_status configure(struct preload_device *d, unsigned int index)
{
	struct budget_account *acct = &d->acct;
	struct budget_member *m = &acct->m;
	const char *limit = env("XDM_PRELOAD_LIMIT");
	const char *key = env("XDM_PRELOAD_KEY");
	const char *dir = env("XDM_BUDGET_DIR");
	enum xdm_status st;

	m->fd = -1;
	m->kind = BUDGET_SLOT_PRELOAD;
	m->configured_limit = m->device_total;
	if (limit && xdm_parse_size(limit, m->device_total, &m->configured_limit) != XDM_OK)
		return xdm_error_set(XDM_E_CONFIG, PRELOAD_WHO ": XDM_PRELOAD_LIMIT '%s' is not "
				     "a size (K/M/G/T, %% of the device, max)", limit);
	st = budget_member_name(m, PRELOAD_WHO, key ? key : m->uuid);
	if (!st)
		st = budget_member_dir(m, PRELOAD_WHO, dir ? dir : budget_default_dir());
	if (!st)
		st = preload_group_config(m, (int)index, d->limit_from, sizeof(d->limit_from));
	if (!st)
		st = budget_member_identity(m, PRELOAD_WHO, env("XDM_BUDGET_CONTAINER"));
	if (!st)
		st = budget_credit_use(acct, PRELOAD_WHO, env("XDM_PRELOAD_CREDIT"));
	/* One account per device: its index tells the threads' records apart. */
	acct->serial = index + 1;
	return st;
}

/* fail=closed unless the environment says open. */
static bool fail_open(void)
{
	const char *fail = env("XDM_PRELOAD_FAIL");

	return fail && !strcmp(fail, "open");
}

static void attach(struct preload_device *d, int ordinal)
{
	enum xdm_status st;
	bool open = fail_open();

	memset(&d->acct, 0, sizeof(d->acct));
	for (unsigned int i = 0; i < PRELOAD_POOLS; i++)
		atomic_store_explicit(&d->pools[i], NULL, memory_order_relaxed);
	atomic_store_explicit(&d->current_pool_known, false, memory_order_relaxed);
	atomic_store_explicit(&d->pool_slack, 0, memory_order_relaxed);
	atomic_store_explicit(&d->last_look_ns, 0, memory_order_relaxed);
	st = describe(&d->acct.m, ordinal);
	if (!st)
		st = configure(d, (unsigned int)ordinal);
	if (!st)
		st = budget_credit_init(&d->acct);
	if (!st) {
		st = budget_member_attach(&d->acct.m);
		if (st)
			budget_credit_fini(&d->acct);
	}
	if (!st) {
		atomic_store_explicit(&d->state, PRELOAD_DEV_READY, memory_order_release);
		return;
	}
	snprintf(d->why, sizeof(d->why), "%s", xdm_last_error_message());
	preload_say("device %d is not under a budget: %s; %s", ordinal, d->why,
		    open ? "its allocations are not counted (XDM_PRELOAD_FAIL=open)" :
			   "its allocations are refused (XDM_PRELOAD_FAIL=closed, the default)");
	atomic_store_explicit(&d->state, open ? PRELOAD_DEV_OPEN : PRELOAD_DEV_CLOSED,
			      memory_order_release);
}

struct preload_device *preload_device_get(int ordinal)
{
	struct preload_device *d;

	if (ordinal < 0 || ordinal >= PRELOAD_DEVICES)
		return NULL;
	d = &devices[ordinal];
	if (atomic_load_explicit(&d->state, memory_order_acquire) != PRELOAD_DEV_NONE)
		return d;
	pthread_mutex_lock(&attach_lock);
	if (atomic_load_explicit(&d->state, memory_order_acquire) == PRELOAD_DEV_NONE)
		attach(d, ordinal);
	pthread_mutex_unlock(&attach_lock);
	return d;
}

struct preload_device *preload_device_current(void)
{
	static _Atomic(cu_ctx_get_device_fn) ctx_get_device;
	cu_ctx_get_device_fn fn = atomic_load_explicit(&ctx_get_device, memory_order_acquire);
	CUdevice dev;

	if (!fn) {
		fn = (cu_ctx_get_device_fn)preload_driver_symbol("cuCtxGetDevice");
		if (!fn)
			return NULL;
		atomic_store_explicit(&ctx_get_device, fn, memory_order_release);
	}
	if (fn(&dev) != CUDA_SUCCESS)
		return NULL;
	return preload_device_get(dev);
}

static CUresult refuse_closed(struct preload_device *d, uint64_t n)
{
	if (!atomic_exchange_explicit(&d->refusing, true, memory_order_relaxed))
		preload_say("refused %" PRIu64 " bytes: the device has no budget (%s)", n, d->why);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult preload_charge(struct preload_device *d, uint64_t n)
{
	int state = atomic_load_explicit(&d->state, memory_order_acquire);
	char sentence[512], why[96] = "";
	uint64_t remaining;

	if (state != PRELOAD_DEV_READY)
		return state == PRELOAD_DEV_CLOSED ? refuse_closed(d, n) : CUDA_SUCCESS;
	if (budget_charge(&d->acct, n, &remaining))
		goto admitted;
	/* The dead may hold what is missing, and the driver's pools may keep
	 * it: one more try after a reclaim and a trim. */
	budget_member_reclaim_dead(&d->acct.m);
	preload_pools_give_back(d);
	if (budget_charge(&d->acct, n, &remaining))
		goto admitted;
	if (d->limit_from[0])
		snprintf(why, sizeof(why), "the group's limit is %s's; ", d->limit_from);
	budget_member_refusal(&d->acct.m, PRELOAD_WHO, n, remaining, why, sentence, sizeof(sentence));
	/* One line per burst: a program that retries smaller sizes is told once. */
	if (!atomic_exchange_explicit(&d->refusing, true, memory_order_relaxed))
		preload_say("%s; the program is told CUDA_ERROR_OUT_OF_MEMORY",
			    sentence + strlen(PRELOAD_WHO ": "));
	return CUDA_ERROR_OUT_OF_MEMORY;

admitted:
	if (atomic_load_explicit(&d->refusing, memory_order_relaxed))
		atomic_store_explicit(&d->refusing, false, memory_order_relaxed);
	return CUDA_SUCCESS;
}

void preload_uncharge(struct preload_device *d, uint64_t n)
{
	if (atomic_load_explicit(&d->state, memory_order_acquire) == PRELOAD_DEV_READY)
		budget_uncharge(&d->acct, n);
}

void preload_clip_info(struct preload_device *d, size_t *free_bytes, size_t *total_bytes)
{
	struct budget_member *m = &d->acct.m;
	uint64_t limit, room;

	if (atomic_load_explicit(&d->state, memory_order_acquire) != PRELOAD_DEV_READY)
		return;
	limit = atomic_load_explicit(&m->shm->limit, memory_order_relaxed);
	if (m->group && atomic_load_explicit(&m->group->limit, memory_order_relaxed) < limit)
		limit = atomic_load_explicit(&m->group->limit, memory_order_relaxed);
	room = budget_member_room(m);
	if (limit < *total_bytes)
		*total_bytes = (size_t)limit;
	if (room < *free_bytes)
		*free_bytes = (size_t)room;
}

struct preload_device *preload_device_by_uuid(const char *uuid)
{
	for (unsigned int i = 0; i < PRELOAD_DEVICES; i++) {
		struct preload_device *d = &devices[i];

		if (atomic_load_explicit(&d->state, memory_order_acquire) == PRELOAD_DEV_READY &&
		    !strcmp(d->acct.m.uuid, uuid))
			return d;
	}
	return NULL;
}

/*
 * A fork child is another process: it gets slots of its own when it
 * allocates.  The parent's mappings stay mapped and untouched; the lock
 * may have been held by a thread the child does not have.
 */
void preload_devices_forked(void)
{
	pthread_mutex_init(&attach_lock, NULL);
	for (unsigned int i = 0; i < PRELOAD_DEVICES; i++)
		atomic_store_explicit(&devices[i].state, PRELOAD_DEV_NONE, memory_order_relaxed);
}

/*
 * At exit: every attached device gives back this process's slot (the
 * last of its process's members empties it, as xdm's budget does at its
 * end).  The mapping stays, so that a thread still allocating while the
 * process exits writes into memory that exists; its charge is then
 * uncounted (GONE).
 */
void preload_devices_leave(void)
{
	for (unsigned int i = 0; i < PRELOAD_DEVICES; i++) {
		struct preload_device *d = &devices[i];

		if (atomic_load_explicit(&d->state, memory_order_acquire) != PRELOAD_DEV_READY ||
		    d->acct.m.pid != getpid())
			continue;
		atomic_store_explicit(&d->state, PRELOAD_DEV_GONE, memory_order_release);
		budget_member_leave(&d->acct.m);
	}
}
