// SPDX-License-Identifier: MIT
/*
 * mempool_allocator.cpp - a torch.cuda.MemPool with an allocator of its own
 * (torch.cuda.MemPool(allocator=...)), served under xdm's budget.
 *
 * torch's caching allocator asks such a pool's allocator for its segments
 * and carves blocks out of them.  Under xdm the pool is a private runtime
 * like any other (pools.cpp), whose base is "torch_allocator": a backend
 * that lives in this module, registered in process (xdm_module_register),
 * whose memory is what the user's allocator returns.  Above it sit the
 * device's adaptors and a pool, so the budget charges every segment (and
 * refuses past its limit before the user's allocator is asked), the tree
 * shows the runtime, and the pool carves blocks as torch's would.
 *
 * Each layer takes its allocator from a table by the number its stack
 * names (key=N) and holds it for its life, so a tensor freed after the user
 * dropped the allocator still goes back through it.
 */
#include "config.h"

#include <cstdio>
#include <cstring>
#include <new>

#include <c10/util/Exception.h>

#include <xdm/module.h>

#include "glue.hpp"

namespace xdm_torch {

namespace {

struct allocator_table {
	std::mutex lock;
	uint64_t next = 1;
	std::map<uint64_t, std::shared_ptr<cca::CUDAAllocator>> allocators;
};

allocator_table &allocators()
{
	static allocator_table *t = new allocator_table;
	return *t;
}

struct torch_allocator_layer {
	std::shared_ptr<cca::CUDAAllocator> allocator;
	std::atomic<uint64_t> outstanding{0};
};

torch_allocator_layer *layer_of(xdm_layer *self)
{
	return static_cast<torch_allocator_layer *>(xdm_layer_priv(self));
}

const xdm_param_spec params[] = {
	{ "key", XDM_PARAM_UINT, nullptr,
	  "which allocator of the torch glue's table this layer's memory comes from" },
	{ nullptr, XDM_PARAM_STRING, nullptr, nullptr },
};

xdm_status layer_init(xdm_layer *self, const xdm_params *p)
{
	if (!xdm_params_has(p, "key"))
		return xdm_error_set(XDM_E_CONFIG, "torch_allocator: no key= names its allocator");
	uint64_t key = xdm_params_uint(p, "key");
	allocator_table &t = allocators();
	std::lock_guard<std::mutex> hold(t.lock);
	auto it = t.allocators.find(key);

	if (it == t.allocators.end())
		return xdm_error_set(XDM_E_CONFIG, "torch_allocator: key %llu names no allocator "
				     "the torch glue holds", static_cast<unsigned long long>(key));
	auto *l = new (std::nothrow) torch_allocator_layer;
	if (!l)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "torch_allocator: no memory for its state");
	/* The layer holds the allocator from now on; the table only handed it over. */
	l->allocator = std::move(it->second);
	t.allocators.erase(it);
	xdm_layer_set_priv(self, l);
	return XDM_OK;
}

void layer_fini(xdm_layer *self)
{
	torch_allocator_layer *l = layer_of(self);

	if (!l)
		return;
	delete l;
	xdm_layer_set_priv(self, nullptr);
}

xdm_status layer_allocate(xdm_layer *self, size_t bytes, xdm_stream_id stream, const char *,
			  xdm_block *out)
{
	torch_allocator_layer *l = layer_of(self);
	void *ptr = nullptr;

	try {
		ptr = l->allocator->raw_alloc_with_stream(
			bytes, static_cast<cudaStream_t>(xdm_layer_stream(self, stream)));
	} catch (const std::exception &e) {
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "torch_allocator: the MemPool's "
				     "allocator refused %zu bytes: %s", bytes, e.what());
	}
	if (!ptr)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "torch_allocator: the MemPool's "
				     "allocator returned no memory for %zu bytes", bytes);
	out->ptr = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(ptr));
	out->bytes = bytes;
	/* torch's allocators align their segments to at least this. */
	out->align = XDM_DEFAULT_ALIGN;
	out->state = XDM_BLOCK_LIVE;
	l->outstanding.fetch_add(bytes, std::memory_order_relaxed);
	return XDM_OK;
}

xdm_status layer_deallocate(xdm_layer *self, xdm_block *block)
{
	torch_allocator_layer *l = layer_of(self);

	if (!block || !block->ptr)
		return xdm_error_set(XDM_E_INVALID, "torch_allocator: deallocate of a NULL block");
	try {
		l->allocator->raw_delete(reinterpret_cast<void *>(static_cast<uintptr_t>(block->ptr)));
	} catch (const std::exception &e) {
		return xdm_error_set(XDM_E_INVALID, "torch_allocator: the MemPool's allocator "
				     "refused the free of %zu bytes at 0x%llx: %s", block->bytes,
				     static_cast<unsigned long long>(block->ptr), e.what());
	}
	l->outstanding.fetch_sub(block->bytes, std::memory_order_relaxed);
	block->state = XDM_BLOCK_FREED;
	return XDM_OK;
}

size_t layer_outstanding(xdm_layer *self)
{
	return layer_of(self)->outstanding.load(std::memory_order_relaxed);
}

/* Filled at run time: C++ before 20 has no designated initializers. */
const xdm_ops *ops_table()
{
	static xdm_ops ops = [] {
		xdm_ops o;

		std::memset(&o, 0, sizeof(o));
		o.abi_major = XDM_ABI_MAJOR;
		o.abi_minor = XDM_ABI_MINOR;
		o.size = sizeof(xdm_ops);
		o.name = "torch_allocator";
		o.kind = XDM_KIND_BACKEND;
		o.description = "the memory of a torch.cuda.MemPool's own allocator, for the torch "
				"glue's private pools";
		o.params = params;
		o.init = layer_init;
		o.fini = layer_fini;
		o.allocate = layer_allocate;
		o.deallocate = layer_deallocate;
		o.bytes_outstanding = layer_outstanding;
		return o;
	}();
	return &ops;
}

} // namespace

std::string allocator_base(std::shared_ptr<cca::CUDAAllocator> allocator)
{
	static std::once_flag registered;
	static xdm_status registration = XDM_OK;
	static std::string why;
	uint64_t key;

	std::call_once(registered, [] {
		registration = xdm_module_register(ops_table());
		if (registration != XDM_OK)
			why = xdm_last_error_message();
	});
	TORCH_CHECK(registration == XDM_OK, "xdm: the backend of MemPools with an allocator "
		    "of their own could not be registered: ", why);
	allocator_table &t = allocators();
	{
		std::lock_guard<std::mutex> hold(t.lock);

		key = t.next++;
		t.allocators[key] = std::move(allocator);
	}
	return "torch_allocator key=" + std::to_string(key);
}

void forget_allocator_base(const std::string &base)
{
	unsigned long long key = 0;

	if (std::sscanf(base.c_str(), "torch_allocator key=%llu", &key) != 1)
		return;
	allocator_table &t = allocators();
	std::lock_guard<std::mutex> hold(t.lock);
	t.allocators.erase(key);
}

} // namespace xdm_torch
