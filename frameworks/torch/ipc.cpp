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
#include <mutex>
#include <utility>
#include <vector>

#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>

#include "glue.hpp"

namespace xdm_torch {

namespace {

/* What the receiver's deleter needs to close what it opened. */
struct opened {
	xdm_runtime *rt;
	xdm_stream_id stream;
	cudaStream_t native;
	int device;
};

/*
 * Closes that came while the stream they wait for was capturing a graph:
 * waiting for a capturing stream is illegal (it ends the capture), so they
 * wait here until a later open or close finds that stream free.
 */
std::mutex deferred_lock;
std::vector<std::pair<void *, opened>> deferred;

bool capturing(cudaStream_t stream) noexcept
{
	cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;

	if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
		(void)cudaGetLastError();
		return true;	/* cannot tell: do not risk the capture */
	}
	return status != cudaStreamCaptureStatusNone;
}

/*
 * On the device the block was opened on, whatever device is current; in
 * relaxed capture mode while a capture may be under way on another thread
 * (unmapping is a call torch's global mode forbids to every thread).
 */
void close_now(void *ptr, const opened &o) noexcept
{
	relaxed_capture relaxed;
	int current = -1;

	if (cudaGetDevice(&current) != cudaSuccess)
		(void)cudaGetLastError();
	if (current != o.device && cudaSetDevice(o.device) != cudaSuccess)
		(void)cudaGetLastError();
	/*
	 * xdm_ipc_close waits for the work queued on the stream the block was
	 * opened on (the stream current then), not for the whole device; work
	 * on other streams is the user's to order, as for any tensor dropped
	 * while another stream still uses it.
	 */
	if (xdm_ipc_close(o.rt, reinterpret_cast<uintptr_t>(ptr), o.stream) != XDM_OK)
		std::fprintf(stderr, "xdm: closing the CUDA memory of another process at %p: %s\n",
			ptr, xdm_last_error_message());
	if (current >= 0 && current != o.device && cudaSetDevice(current) != cudaSuccess)
		(void)cudaGetLastError();
}

/* Close the deferred ones whose stream is no longer capturing. */
void close_deferred() noexcept
{
	std::vector<std::pair<void *, opened>> ready;

	try {
		std::lock_guard<std::mutex> hold(deferred_lock);

		for (auto it = deferred.begin(); it != deferred.end();) {
			if (capturing(it->second.native)) {
				++it;
				continue;
			}
			ready.push_back(*it);
			it = deferred.erase(it);
		}
	} catch (...) {
		/* Out of memory: what was moved out is closed, the rest waits. */
	}
	for (const auto &d : ready)
		close_now(d.first, d.second);
}

void close_opened(void *ptr, const opened &o) noexcept
{
	if (capturing(o.native)) {
		try {
			std::lock_guard<std::mutex> hold(deferred_lock);

			deferred.emplace_back(ptr, o);
			return;
		} catch (...) {
			/* No memory to defer it: leaking the mapping beats ending the capture. */
			std::fprintf(stderr, "xdm: the CUDA memory of another process at %p, dropped during "
				"a graph capture, stays mapped until this process exits\n", ptr);
			return;
		}
	}
	close_now(ptr, o);
	close_deferred();
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
	opened o{ rt, 0, stream, device };
	uint64_t ptr = 0;
	size_t bytes = 0;

	TORCH_CHECK(handle.size() == sizeof(h.bytes),
		    "xdm: the CUDA memory of another process comes as a handle of " +
		    std::to_string(sizeof(h.bytes)) + " bytes, and this one has " +
		    std::to_string(handle.size()) + ": was it sent by a process that does not "
		    "allocate through xdm?");
	std::memcpy(h.bytes, handle.data(), sizeof(h.bytes));
	close_deferred();
	if (xdm_native_stream(rt, stream, &o.stream) != XDM_OK)
		throw_xdm_error("the current stream of " + device_name(device));
	if (xdm_ipc_open(rt, &h, o.stream, &ptr, &bytes) != XDM_OK)
		throw_xdm_error("opening the CUDA memory another process sent, on " +
				device_name(device));
	return std::shared_ptr<void>(reinterpret_cast<void *>(static_cast<uintptr_t>(ptr)),
				     [o](void *p) { close_opened(p, o); });
}

} // namespace xdm_torch
