// SPDX-License-Identifier: MIT
/*
 * ipc.cpp - CUDA tensors sent to other processes (torch.multiprocessing,
 * a storage's _share_cuda_ and _new_shared_cuda): torch's shareIpcHandle
 * and getIpcDevPtr over xdm's sharing of blocks (xdm_ipc_export, open,
 * close).
 *
 * The sender's storage is an xdm block: its handle is xdm's 256 bytes,
 * which torch carries as its own, and the offset is where the storage
 * starts in the block (0: a storage is a block of its own).  torch counts
 * the receivers' references on top (its ref-counter file and IPC event);
 * xdm holds the block from its stack while any receiver has it open, so
 * the sender's free of the tensor never lets the memory go under them.
 * The receiver opens the handle in its current device's runtime: both
 * processes must allocate through xdm, and the block's stack must be one
 * whose memory can be shared (xdm-torch(7), IPC).
 */
#include "config.h"

#include <cstdio>
#include <cstring>

#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>

#include "glue.hpp"

namespace xdm_torch {

namespace {

/* What the receiver's deleter needs to close what it opened. */
struct opened {
	xdm_runtime *rt;
	xdm_stream_id stream;
};

void close_opened(void *ptr, const opened &o) noexcept
{
	/*
	 * The storage is gone, but work of this process on any stream may
	 * still read it: the device is waited for before the mapping goes
	 * (a mapping pulled from under a kernel kills the context).
	 */
	if (cudaDeviceSynchronize() != cudaSuccess)
		(void)cudaGetLastError();
	if (xdm_ipc_close(o.rt, reinterpret_cast<uintptr_t>(ptr), o.stream) != XDM_OK)
		fprintf(stderr, "xdm: closing the CUDA memory of another process at %p: %s\n",
			ptr, xdm_last_error_message());
}

} // namespace

cca::ShareableHandle share_ipc_handle(void *ptr)
{
	xdm_ipc_handle h;
	xdm_runtime *rt;
	xdm_block b;

	rt = owner_of(ptr, &b, nullptr);
	TORCH_CHECK(rt, "xdm: a CUDA tensor sent to another process must be memory of an xdm "
		    "runtime; " + hex_address(ptr) + " is not the address of a live block");
	if (xdm_ipc_export(rt, &b, &h) != XDM_OK)
		throw_xdm_error("sending the CUDA memory at " + hex_address(ptr) +
				" to another process");
	cca::ShareableHandle out;
	out.offset = static_cast<ptrdiff_t>(reinterpret_cast<uintptr_t>(ptr) - b.ptr);
	out.handle.assign(reinterpret_cast<const char *>(h.bytes), sizeof(h.bytes));
	return out;
}

std::shared_ptr<void> open_ipc_handle(const std::string &handle)
{
	int device = static_cast<int>(c10::cuda::current_device());
	xdm_runtime *rt = runtime_of(device);
	cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device).stream();
	xdm_ipc_handle h;
	opened o{ rt, 0 };
	uint64_t ptr = 0;
	size_t bytes = 0;

	TORCH_CHECK(handle.size() == sizeof(h.bytes),
		    "xdm: the CUDA memory of another process comes as a handle of " +
		    std::to_string(sizeof(h.bytes)) + " bytes, and this one has " +
		    std::to_string(handle.size()) + ": was it sent by a process that does not "
		    "allocate through xdm?");
	std::memcpy(h.bytes, handle.data(), sizeof(h.bytes));
	if (xdm_native_stream(rt, stream, &o.stream) != XDM_OK)
		throw_xdm_error("the current stream of " + device_name(device));
	if (xdm_ipc_open(rt, &h, o.stream, &ptr, &bytes) != XDM_OK)
		throw_xdm_error("opening the CUDA memory another process sent, on " +
				device_name(device));
	return std::shared_ptr<void>(reinterpret_cast<void *>(static_cast<uintptr_t>(ptr)),
				     [o](void *p) { close_opened(p, o); });
}

} // namespace xdm_torch
