// SPDX-License-Identifier: MIT
/*
 * pools.cpp - torch's memory pools (CUDA graphs' private pools, MemPool)
 * as private xdm runtimes.
 *
 * torch gives every graph capture a pool of its own (or one the user
 * shares between captures), and every torch.cuda.MemPool one: memory that
 * only allocations routed there may reuse.  Without it two graphs replayed
 * concurrently would share scratch memory and overwrite each other.  Under
 * xdm a pool is a private runtime of the device (xdm_runtime_create), so
 * it is under the same budget and shows in the tree beside the device's
 * runtime ("0.1", "0.2", ...).  Its stack is the device stack's adaptors
 * (budget, logging, guard) over "pool keep=true" on plain device memory:
 * a pool that keeps its chunks until it is trimmed or destroyed, because a
 * graph replays into the addresses its capture was given even after every
 * block of the capture was freed.  Its base is cuda_direct (cuMemAlloc),
 * or the device's own cuda_vmm layer where the stack has one; never the
 * stream-ordered cuda_async, whose cuMemAllocAsync on a capturing stream
 * would become memory owned by the graph.  The pool keeps no per-thread
 * caches (tcache=0): torch's CUDA graph trees put a pool back as a
 * checkpoint found it (pool_restore) by allocating blocks again at their
 * old addresses, which must then be free in the pool whichever thread
 * freed them (autograd's thread frees the backward's).
 *
 * Routes: beginAllocateToPool opens one (the pool, and a filter torch
 * gives: "this stream is capturing into my graph", or "this thread");
 * allocations whose stream a route accepts go to its pool, the newest
 * route first, as torch does.  While any route is open, xdm's calls run in
 * relaxed capture mode on their thread, and the trimmers of the device
 * runtimes' pools are paused: torch captures in global mode, where another
 * thread's call that may synchronize breaks the capture.
 */
#include "config.h"

#include <algorithm>
#include <cstdio>

#include <c10/util/Exception.h>

#include "glue.hpp"

namespace xdm_torch {

namespace {

struct open_route {
	int device;
	MempoolId_t id;
	std::function<bool(cudaStream_t)> filter;
};

/* A trimmer paused while routes are open, with the period to restore. */
struct paused_trimmer {
	xdm_runtime *rt;
	uint32_t layer;
	std::string period;
};

struct pool_table {
	std::mutex lock;
	std::map<std::pair<int, MempoolId_t>, private_pool> pools;
	std::vector<open_route> routes;
	std::vector<paused_trimmer> paused;
};

/* Made once and never destroyed: torch releases pools during exit. */
pool_table &table()
{
	static pool_table *t = new pool_table;
	return *t;
}

/* routes.size() and pools.size(), read without the lock on the hot paths. */
std::atomic<int> open_routes;
std::atomic<int> live_pools;
/* torch's caching_allocator_enable(False) is in force. */
std::atomic<bool> caching_off;

/*
 * The pool id of the runtime that serves torch while its caching is off:
 * the device's adaptors over its base with no pool, so that every free
 * gives the memory back at once, under the same budget.  torch numbers its
 * own pools upward from 1 in one half of the pair, never this.
 */
const MempoolId_t uncached_pool{0, ~0ull};

std::string pool_name(MempoolId_t id)
{
	return "(" + std::to_string(id.first) + ", " + std::to_string(id.second) + ")";
}

/* The layer named after the first word of a stack spec's layer text. */
std::string layer_word(const std::string &layer)
{
	size_t start = layer.find_first_not_of(' ');
	size_t end;

	if (start == std::string::npos)
		return "";
	end = layer.find(' ', start);
	return layer.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

std::string trimmed(const std::string &s)
{
	size_t a = s.find_first_not_of(' '), b = s.find_last_not_of(' ');

	return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

/*
 * The private stack of a pool of the device: the adaptors of the device's
 * stack, then a pool that keeps its chunks over plain device memory.
 */
std::string private_stack(xdm_runtime *device_rt, bool caching, const std::string &own_base)
{
	char spec[1024] = "";
	std::string stack, base = "cuda_direct", text;
	size_t at = 0;

	if (xdm_runtime_stack_spec(device_rt, spec, sizeof(spec)) != XDM_OK)
		throw_xdm_error("reading the stack of runtime " +
				std::string(xdm_runtime_name(device_rt)));
	text = spec;
	while (at <= text.size()) {
		size_t bar = text.find('|', at);
		std::string layer = trimmed(text.substr(at, bar == std::string::npos ?
							     std::string::npos : bar - at));
		std::string word = layer_word(layer);

		if (word == "budget" || word == "logging" || word == "guard")
			stack += layer + " | ";
		else if (word == "cuda_vmm")
			base = layer;
		if (bar == std::string::npos)
			break;
		at = bar + 1;
	}
	/* A MemPool's own allocator is the base (mempool_allocator.cpp). */
	if (!own_base.empty())
		base = own_base;
	if (!caching)
		return stack + base;
	/* 2M chunks: a graph's pool holds what its capture used, not a device's worth. */
	return stack + "pool keep=true tcache=0 chunk=2M | " + base;
}

private_pool *find_locked(pool_table &t, int device, MempoolId_t id)
{
	auto it = t.pools.find({device, id});

	return it == t.pools.end() ? nullptr : &it->second;
}

private_pool &create_locked(pool_table &t, int device, MempoolId_t id, bool caching = true,
			    const std::string &own_base = "")
{
	xdm_runtime *device_rt = runtime_of(device);
	std::string stack = private_stack(device_rt, caching, own_base);
	xdm_runtime *rt = nullptr;

	if (xdm_runtime_create(static_cast<uint32_t>(device), nullptr, stack.c_str(), &rt) !=
	    XDM_OK) {
		if (!own_base.empty())
			forget_allocator_base(own_base);
		throw_xdm_error("the private pool " + pool_name(id) + " of " +
				device_name(device) + " (stack '" + stack + "')");
	}
	/* The peers torch granted the device's memory before this pool was made. */
	uint64_t peers = granted_peers(device);
	for (uint32_t peer = 0; peers; peer++, peers >>= 1) {
		if (!(peers & 1) || xdm_runtime_grant_peer(rt, peer) == XDM_OK)
			continue;
		std::string why = xdm_last_error_message();

		xdm_runtime_destroy(rt);
		TORCH_CHECK(false, "xdm: the private pool ", pool_name(id), " of ",
			    device_name(device), " could not grant device ", peer,
			    " the access torch enabled: ", why);
	}
	private_pool &p = t.pools[{device, id}];
	p = {id, device, rt, 0};
	live_pools.fetch_add(1, std::memory_order_release);
	return p;
}

size_t live_blocks(xdm_runtime *rt)
{
	xdm_stats s;

	xdm_runtime_stats(rt, &s);
	return s.blocks_outstanding;
}

/*
 * A released pool gives its memory back: all of it (the runtime goes)
 * once no block of it lives, else its wholly free chunks.  Under the lock.
 */
void drain_locked(pool_table &t, int device, MempoolId_t id)
{
	private_pool *p = find_locked(t, device, id);

	if (!p || p->use_count > 0)
		return;
	if (live_blocks(p->rt) == 0) {
		if (xdm_runtime_destroy(p->rt) != XDM_OK) {
			std::fprintf(stderr, "xdm: the private pool %s of %s is kept: %s\n",
				     pool_name(id).c_str(), device_name(device).c_str(),
				     xdm_last_error_message());
			return;
		}
		t.pools.erase({device, id});
		live_pools.fetch_sub(1, std::memory_order_release);
		return;
	}
	int pool = layer_index(p->rt, "pool");
	if (pool >= 0)
		xdm_layer_attr_store(p->rt, static_cast<uint32_t>(pool), "trim", "1");
}

/* Stop the trimmers of the device runtimes' pools (the first route opens). */
void pause_trimmers_locked(pool_table &t)
{
	for (int d = 0; d < XDM_MAX_DEVICES; d++) {
		xdm_runtime *rt = built_runtime(d);
		uint64_t period = 0;
		int pool = rt ? layer_index(rt, "pool") : -1;

		if (!layer_number(rt, pool, "trim_ms", &period) || period == 0)
			continue;
		if (xdm_layer_attr_store(rt, static_cast<uint32_t>(pool), "trim_ms", "0") == XDM_OK)
			t.paused.push_back({rt, static_cast<uint32_t>(pool), std::to_string(period)});
	}
}

/* Start them again at their periods (the last route closed). */
void resume_trimmers_locked(pool_table &t)
{
	for (const paused_trimmer &p : t.paused)
		if (xdm_layer_attr_store(p.rt, p.layer, "trim_ms", p.period.c_str()) != XDM_OK)
			std::fprintf(stderr, "xdm: the pool trimmer of runtime %s stays stopped: "
				     "%s\n", xdm_runtime_name(p.rt), xdm_last_error_message());
	t.paused.clear();
}

void collect_block(const xdm_block *b, void *arg)
{
	static_cast<std::vector<void *> *>(arg)->push_back(
		reinterpret_cast<void *>(static_cast<uintptr_t>(b->ptr)));
}

/* What a checkpoint of a pool holds: its live blocks when it was taken. */
struct pool_state final : cca::AllocatorState {
	int device;
	MempoolId_t id;
	std::vector<xdm_block> live;
};

void collect_whole(const xdm_block *b, void *arg)
{
	static_cast<std::vector<xdm_block> *>(arg)->push_back(*b);
}

} // namespace

bool private_pools_live()
{
	return live_pools.load(std::memory_order_acquire) > 0;
}

bool routes_open()
{
	return open_routes.load(std::memory_order_acquire) > 0;
}

xdm_runtime *route(int device, cudaStream_t stream, MempoolId_t *pool)
{
	xdm_runtime *rt = runtime_of(device);

	if (!routes_open() && caching_enabled())
		return rt;
	pool_table &t = table();
	std::lock_guard<std::mutex> hold(t.lock);
	for (auto it = t.routes.rbegin(); it != t.routes.rend(); ++it) {
		if (it->device != device || !it->filter(stream))
			continue;
		private_pool *p = find_locked(t, device, it->id);
		if (p) {
			*pool = p->id;
			return p->rt;
		}
	}
	if (caching_enabled())
		return rt;
	/* torch's caching_allocator_enable(False): the stack's base, no pool. */
	private_pool *p = find_locked(t, device, uncached_pool);
	if (!p)
		p = &create_locked(t, device, uncached_pool, false);
	/* In use while caching is off: empty_cache leaves it be (set_caching releases it). */
	p->use_count = 1;
	*pool = p->id;
	return p->rt;
}

void set_caching(bool enabled)
{
	caching_off.store(!enabled, std::memory_order_release);
	if (!enabled)
		return;
	/*
	 * Caching on again: the uncached runtimes are released like a torch
	 * pool, gone now where empty, else at the empty_cache after their last
	 * block goes, so that the pool table's scans stop when nothing else lives.
	 */
	pool_table &t = table();
	std::lock_guard<std::mutex> hold(t.lock);
	for (int d = 0; d < XDM_MAX_DEVICES; d++) {
		private_pool *p = find_locked(t, d, uncached_pool);

		if (!p)
			continue;
		p->use_count = 0;
		drain_locked(t, d, uncached_pool);
	}
}

bool caching_enabled()
{
	return !caching_off.load(std::memory_order_acquire);
}

xdm_runtime *pool_runtime(int device, MempoolId_t id)
{
	pool_table &t = table();
	std::lock_guard<std::mutex> hold(t.lock);
	private_pool *p = find_locked(t, device, id);

	return p ? p->rt : nullptr;
}

std::vector<owned_runtime> device_runtimes(int device)
{
	std::vector<owned_runtime> all;
	xdm_runtime *rt = built_runtime(device);

	if (rt)
		all.push_back({rt, {0, 0}});
	if (live_pools.load(std::memory_order_acquire) == 0)
		return all;
	pool_table &t = table();
	std::lock_guard<std::mutex> hold(t.lock);
	for (auto &entry : t.pools)
		if (entry.second.device == device)
			all.push_back({entry.second.rt, entry.second.id});
	return all;
}

uint64_t reserved_by_others(int device, xdm_runtime *except, uint64_t (*reserved)(xdm_runtime *))
{
	xdm_runtime *own = built_runtime(device);
	pool_table &t = table();
	std::lock_guard<std::mutex> hold(t.lock);
	uint64_t sum = own && own != except ? reserved(own) : 0;

	for (auto &entry : t.pools)
		if (entry.second.device == device && entry.second.rt != except)
			sum += reserved(entry.second.rt);
	return sum;
}

xdm_runtime *owner_of(void *ptr, xdm_block *out, MempoolId_t *pool)
{
	for (int d = 0; d < XDM_MAX_DEVICES; d++) {
		xdm_runtime *rt = built_runtime(d);

		if (rt && xdm_native_lookup(rt, ptr, out) == XDM_OK) {
			if (pool)
				*pool = {0, 0};
			return rt;
		}
	}
	if (live_pools.load(std::memory_order_acquire) == 0)
		return nullptr;
	pool_table &t = table();
	std::lock_guard<std::mutex> hold(t.lock);
	for (auto &entry : t.pools)
		if (xdm_native_lookup(entry.second.rt, ptr, out) == XDM_OK) {
			if (pool)
				*pool = entry.second.id;
			return entry.second.rt;
		}
	return nullptr;
}

bool release_anywhere(void *ptr, int hint_device)
{
	xdm_runtime *hint = built_runtime(hint_device);

	if (hint && xdm_native_release(hint, ptr) == XDM_OK)
		return true;
	for (int d = 0; d < XDM_MAX_DEVICES; d++) {
		xdm_runtime *rt = built_runtime(d);

		if (rt && rt != hint && xdm_native_release(rt, ptr) == XDM_OK)
			return true;
	}
	if (live_pools.load(std::memory_order_acquire) == 0)
		return false;
	pool_table &t = table();
	std::lock_guard<std::mutex> hold(t.lock);
	for (auto &entry : t.pools)
		if (xdm_native_release(entry.second.rt, ptr) == XDM_OK)
			return true;
	return false;
}

/*
 * A free made inside a capture, of a block with a use outside it that had
 * not completed, is held by the core until that use completes
 * (xdm_release_capture_frees lets go of what may go, with no reap and no
 * synchronize: a capture's edges stall nothing).  Called with no route
 * open, so no capture of torch's is under way that a query could break.
 */
static void let_go_of_capture_frees_locked(pool_table &t, int device)
{
	xdm_runtime *rt = built_runtime(device);

	if (rt)
		(void)xdm_release_capture_frees(rt);
	for (auto &entry : t.pools)
		if (entry.first.first == device)
			(void)xdm_release_capture_frees(entry.second.rt);
}

void create_or_incref_pool(int device, MempoolId_t id, std::shared_ptr<cca::CUDAAllocator> own)
{
	pool_table &t = table();
	std::lock_guard<std::mutex> hold(t.lock);
	private_pool *p = find_locked(t, device, id);

	if (!p) {
		std::string base = own ? allocator_base(std::move(own)) : "";

		try {
			p = &create_locked(t, device, id, true, base);
		} catch (...) {
			/* Whatever failed before the runtime was made, the allocator goes back. */
			if (!base.empty())
				forget_allocator_base(base);
			throw;
		}
	}
	p->use_count++;
}

void begin_allocate_to_pool(int device, MempoolId_t id, std::function<bool(cudaStream_t)> filter)
{
	pool_table &t = table();
	std::lock_guard<std::mutex> hold(t.lock);
	private_pool *p = find_locked(t, device, id);

	for (const open_route &r : t.routes)
		TORCH_CHECK(r.device != device || r.id != id, "xdm: beginAllocateToPool: pool ",
			    pool_name(id), " of ", device_name(device), " has a route open already");
	if (!p)
		p = &create_locked(t, device, id);
	p->use_count++;
	if (t.routes.empty()) {
		/*
		 * Before the capture begins: frees an earlier capture held for
		 * work outside it go back to their pools if that work is done,
		 * so this capture may reuse their memory, as under torch.
		 */
		let_go_of_capture_frees_locked(t, device);
		pause_trimmers_locked(t);
	}
	t.routes.push_back({device, id, std::move(filter)});
	open_routes.store(static_cast<int>(t.routes.size()), std::memory_order_release);
}

void end_allocate_to_pool(int device, MempoolId_t id)
{
	pool_table &t = table();
	std::lock_guard<std::mutex> hold(t.lock);
	auto it = std::find_if(t.routes.begin(), t.routes.end(), [&](const open_route &r) {
		return r.device == device && r.id == id;
	});

	TORCH_CHECK(it != t.routes.end(), "xdm: endAllocateToPool: no route to pool ",
		    pool_name(id), " of ", device_name(device), " is open");
	t.routes.erase(it);
	open_routes.store(static_cast<int>(t.routes.size()), std::memory_order_release);
	if (t.routes.empty()) {
		let_go_of_capture_frees_locked(t, device);
		resume_trimmers_locked(t);
	}
}

void release_pool(int device, MempoolId_t id)
{
	pool_table &t = table();
	std::lock_guard<std::mutex> hold(t.lock);
	private_pool *p = find_locked(t, device, id);

	TORCH_CHECK(p, "xdm: releasePool: ", device_name(device), " has no pool ", pool_name(id));
	TORCH_CHECK(p->use_count > 0, "xdm: releasePool: pool ", pool_name(id),
		    " was released already");
	p->use_count--;
}

int pool_use_count(int device, MempoolId_t id)
{
	pool_table &t = table();
	std::lock_guard<std::mutex> hold(t.lock);
	private_pool *p = find_locked(t, device, id);

	TORCH_CHECK(p, "xdm: getPoolUseCount: ", device_name(device), " has no pool ",
		    pool_name(id));
	return p->use_count;
}

bool pool_live_allocations_are(int device, MempoolId_t id, const std::unordered_set<void *> &expected)
{
	pool_table &t = table();
	std::lock_guard<std::mutex> hold(t.lock);
	private_pool *p = find_locked(t, device, id);
	std::vector<void *> live;

	TORCH_CHECK(p, "xdm: checkPoolLiveAllocations: ", device_name(device), " has no pool ",
		    pool_name(id));
	if (xdm_runtime_for_each_block(p->rt, collect_block, &live) != XDM_OK)
		throw_xdm_error("listing the blocks of pool " + pool_name(id));
	if (live.size() != expected.size())
		return false;
	for (void *ptr : live)
		if (!expected.count(ptr))
			return false;
	return true;
}

std::shared_ptr<cca::AllocatorState> pool_checkpoint(int device, MempoolId_t id)
{
	pool_table &t = table();
	std::lock_guard<std::mutex> hold(t.lock);
	private_pool *p = find_locked(t, device, id);
	auto state = std::make_shared<pool_state>();

	TORCH_CHECK(p, "xdm: getCheckpointState: ", device_name(device), " has no pool ",
		    pool_name(id));
	state->device = device;
	state->id = id;
	if (xdm_runtime_for_each_block(p->rt, collect_whole, &state->live) != XDM_OK)
		throw_xdm_error("listing the blocks of pool " + pool_name(id));
	return state;
}

/*
 * torch's native allocator does the same in the same order: it frees the
 * pool's live blocks, then carves the checkpoint's blocks again.  The pool
 * keeps its chunks (keep=true), so the addresses are still its own; only
 * a block another thread still caches could stand in the way, and then
 * the restore fails with xdm's sentence.  A failure part way leaves the
 * blocks already put back in the delta, whose deleters free them.
 */
/*
 * Allocate b again at its address, on its stream, and trace it; false
 * (the thread's error set) when refused.
 */
static bool remake(int device, xdm_runtime *rt, MempoolId_t id, const xdm_block &b)
{
	xdm_block again;

	if (xdm_allocate_at(rt, b.ptr, b.bytes, b.stream, b.tag, &again) != XDM_OK)
		return false;
	if (tracing()) {
		void *handle = nullptr;

		xdm_stream_handle(rt, b.stream, &handle);
		trace_alloc(device, reinterpret_cast<void *>(static_cast<uintptr_t>(b.ptr)), b.bytes,
			    static_cast<cudaStream_t>(handle), id);
	}
	return true;
}

/*
 * A restore that failed halfway is undone, so that no tensor's deleter
 * frees a block that is now another's: the blocks it allocated are freed
 * and the blocks it freed are allocated again at their addresses, out of
 * the chunks the pool keeps.  The count of those that could not be.
 */
static size_t undo_restore(int device, xdm_runtime *rt, MempoolId_t id,
			   const std::vector<void *> &made, const std::vector<xdm_block> &freed)
{
	size_t lost = 0;

	for (void *ptr : made)
		free_block_in(rt, id, ptr);
	for (const xdm_block &b : freed)
		if (!remake(device, rt, id, b))
			lost++;
	return lost;
}

cca::CheckpointDelta pool_restore(int device, const std::shared_ptr<cca::AllocatorState> &as)
{
	auto state = std::dynamic_pointer_cast<pool_state>(as);
	c10::Device where(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device));
	cca::CheckpointDelta delta;
	std::vector<xdm_block> live;
	std::vector<void *> made;
	xdm_runtime *rt;

	TORCH_CHECK(state && state->device == device, "xdm: setCheckpointPoolState: the state "
		    "was not taken from a pool of " + device_name(device) + " by xdm");
	rt = pool_runtime(device, state->id);
	TORCH_CHECK(rt, "xdm: setCheckpointPoolState: " + device_name(device) +
		    " has no pool " + pool_name(state->id));
	if (xdm_runtime_for_each_block(rt, collect_whole, &live) != XDM_OK)
		throw_xdm_error("listing the blocks of pool " + pool_name(state->id));
	for (const xdm_block &b : live) {
		void *ptr = reinterpret_cast<void *>(static_cast<uintptr_t>(b.ptr));

		free_block_in(rt, state->id, ptr);
		delta.ptrs_freed.push_back(ptr);
	}
	for (const xdm_block &b : state->live) {
		if (!remake(device, rt, state->id, b)) {
			std::string why = xdm_last_error_message();
			size_t lost = undo_restore(device, rt, state->id, made, live);

			TORCH_CHECK(false, "xdm: putting pool ", pool_name(state->id), " back as its "
				    "checkpoint found it (a block of ", std::to_string(b.bytes),
				    " bytes at ", hex_address(b.ptr), "): ", why,
				    lost ? "; " + std::to_string(lost) + " of the blocks live before "
				    "the call could not be put back, and their tensors' frees will "
				    "be refused" : "; the pool is as it was before the call");
		}
		made.push_back(reinterpret_cast<void *>(static_cast<uintptr_t>(b.ptr)));
	}
	/* Owners only once all are made: a DataPtr frees its block when it goes. */
	for (void *ptr : made)
		delta.dataptrs_allocd.emplace_back(ptr, ptr, &delete_block, where);
	return delta;
}

/*
 * torch's empty_cache gives back every idle byte at once, and its callers
 * read memory_reserved right after.  A reap alone leaves a pool over a
 * virtual-memory upstream to its trimmer (xdm-pool(7)), so the pool's trim
 * is written too: every wholly free chunk or granule goes back now.
 */
static bool trim_pool(xdm_runtime *rt)
{
	int pool = layer_index(rt, "pool");

	return pool < 0 || xdm_layer_attr_store(rt, static_cast<uint32_t>(pool), "trim", "1") ==
				   XDM_OK;
}

void empty_cache(MempoolId_t id)
{
	pool_table &t = table();
	std::vector<bool> routed(XDM_MAX_DEVICES, false);
	/* Trims on other devices may run while a capture is under way in global mode. */
	relaxed_capture relaxed;

	/*
	 * A device with a route open (a capture, a use_mem_pool) gives nothing
	 * back: a graph being captured may use what its runtimes hold, and
	 * giving back queues work on streams that may be capturing.  Every
	 * other device is emptied, as under torch.
	 */
	if (routes_open()) {
		std::lock_guard<std::mutex> hold(t.lock);

		for (const open_route &r : t.routes)
			if (r.device >= 0 && r.device < XDM_MAX_DEVICES)
				routed[r.device] = true;
	}
	if (id == MempoolId_t{0, 0}) {
		for (int d = 0; d < XDM_MAX_DEVICES; d++) {
			xdm_runtime *rt = built_runtime(d);

			if (!rt || routed[d])
				continue;
			if (xdm_reap_pending(rt) != XDM_OK || !trim_pool(rt))
				std::fprintf(stderr, "xdm: emptying the cache of %s: %s\n",
					     device_name(d).c_str(), xdm_last_error_message());
		}
	}
	std::lock_guard<std::mutex> hold(t.lock);
	std::vector<std::pair<int, MempoolId_t>> released;
	for (auto &entry : t.pools)
		if (entry.second.use_count == 0 && !routed[entry.second.device] &&
		    (id == MempoolId_t{0, 0} || entry.second.id == id))
			released.push_back(entry.first);
	for (auto &key : released)
		drain_locked(t, key.first, key.second);
}

relaxed_capture::relaxed_capture() : switched(false), previous(cudaStreamCaptureModeRelaxed)
{
	if (!routes_open())
		return;
	switched = cudaThreadExchangeStreamCaptureMode(&previous) == cudaSuccess;
}

relaxed_capture::~relaxed_capture()
{
	if (switched)
		cudaThreadExchangeStreamCaptureMode(&previous);
}

} // namespace xdm_torch
