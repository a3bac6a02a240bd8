// SPDX-License-Identifier: MIT
/*
 * check_rmm_cuda.cpp - xdm and RMM both ways, on the GPU (built only with
 * --with-rmm; the conformance suite runs the rmm backend's stacks too).
 *
 *   backend_serves_streams   the rmm backend, each resource: blocks on two
 *                            streams hold what kernels wrote, RMM's own
 *                            counters (the tree) and xdm's agree, exactly
 *   budget_over_rmm_pool     budget | rmm resource=pool refuses past its
 *                            limit, and the refusal leaves RMM untouched
 *   rapids_lifecycle         xdm::rmm_resource as RMM's current resource,
 *                            driven as a RAPIDS library drives it:
 *                            device_buffer and device_uvector on two
 *                            streams, resized and copied, a budget refusal
 *                            as rmm::out_of_memory with xdm's sentence, the
 *                            blocks in the runtime while they live
 *
 * One process, no fork (CUDA state does not survive it); a machine
 * without a GPU skips (77).
 */
#include "config.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include <rmm/device_buffer.hpp>
#include <rmm/device_uvector.hpp>
#if __has_include(<rmm/mr/per_device_resource.hpp>)
#include <rmm/mr/per_device_resource.hpp>
#else
#include <rmm/mr/device/per_device_resource.hpp>
#endif

#include <xdm/module.h>
#include <xdm/rmm.hpp>
#include <xdm/xdm.h>

/* Last: check.h defines fail(), a name the C++ library uses too. */
#include <check.h>

extern "C" void ct_take_gpu_lock(void);

namespace {

constexpr std::size_t MIB = std::size_t{1} << 20;

#define TU_OK(call)                                                                     \
	do {                                                                             \
		enum xdm_status st_ = (call);                                            \
		ck_assert_msg(st_ == XDM_OK, "%s: %s (%s)", #call, xdm_strerror(st_),     \
			      xdm_last_error_message());                                 \
	} while (0)

#define CUDA_OK(call)                                                                   \
	do {                                                                             \
		cudaError_t e_ = (call);                                                 \
		ck_assert_msg(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_)); \
	} while (0)

struct xdm_runtime *make(const std::string &stack)
{
	struct xdm_runtime *rt = nullptr;
	enum xdm_status st = xdm_runtime_create(0, "cuda", stack.c_str(), &rt);

	ck_assert_msg(st == XDM_OK, "stack '%s': %s (%s)", stack.c_str(), xdm_strerror(st),
		      xdm_last_error_message());
	return rt;
}

/* The bottom layer's attribute as a number. */
uint64_t bottom_attr(struct xdm_runtime *rt, const char *name)
{
	uint32_t layer = xdm_runtime_layer_count(rt) - 1;
	char buf[64];

	TU_OK(xdm_layer_attr_show(rt, layer, name, buf, sizeof(buf)));
	return std::strtoull(buf, nullptr, 10);
}

/* How many of n bytes at p hold v, read back to the host. */
std::size_t count_bytes(const void *p, std::size_t n, unsigned char v)
{
	std::vector<unsigned char> host(n);
	std::size_t same = 0;

	CUDA_OK(cudaMemcpy(host.data(), p, n, cudaMemcpyDeviceToHost));
	for (unsigned char c : host)
		same += c == v;
	return same;
}

cudaStream_t handle(struct xdm_runtime *rt, xdm_stream_id s)
{
	void *h = nullptr;

	TU_OK(xdm_stream_handle(rt, s, &h));
	return static_cast<cudaStream_t>(h);
}

std::string budget_key(const char *what)
{
	return std::string("rmmtest-") + std::to_string(getpid()) + "-" + what;
}

} // namespace

START_TEST(backend_serves_streams)
{
	static const char *const resources[] = { "cuda_async", "cuda", "pool", "arena",
						 "binning" };

	for (const char *r : resources) {
		struct xdm_runtime *rt = make(std::string("rmm resource=") + r);
		struct xdm_block a, b;
		struct xdm_stats st;
		char text[128];

		TU_OK(xdm_layer_attr_show(rt, 0, "resource", text, sizeof(text)));
		ck_assert_msg(std::strncmp(text, r, std::strlen(r)) == 0, "%s: resource %s", r,
			      text);
		TU_OK(xdm_allocate(rt, 3 * MIB, 0, "a", &a));
		TU_OK(xdm_allocate(rt, 5000, 1, "b", &b));
		CUDA_OK(cudaMemsetAsync(reinterpret_cast<void *>(a.ptr), 0x5a, 3 * MIB,
					handle(rt, 0)));
		CUDA_OK(cudaMemsetAsync(reinterpret_cast<void *>(b.ptr), 0xa5, 5000,
					handle(rt, 1)));
		TU_OK(xdm_stream_synchronize(rt, 0));
		TU_OK(xdm_stream_synchronize(rt, 1));
		ck_assert_uint_eq(count_bytes(reinterpret_cast<void *>(a.ptr), 3 * MIB, 0x5a),
				  3 * MIB);
		ck_assert_uint_eq(count_bytes(reinterpret_cast<void *>(b.ptr), 5000, 0xa5), 5000);
		/* RMM's own figures, as the tree shows them, and xdm's. */
		xdm_runtime_stats(rt, &st);
		ck_assert_uint_eq(st.bytes_outstanding, a.bytes + b.bytes);
		ck_assert_uint_eq(bottom_attr(rt, "bytes_current"), a.bytes + b.bytes);
		ck_assert_uint_eq(bottom_attr(rt, "allocations_current"), 2);
		/* A use on stream 1 of a's memory: its free waits for it. */
		TU_OK(xdm_record_block_use(rt, &a, 1));
		TU_OK(xdm_deallocate(rt, &a));
		TU_OK(xdm_deallocate(rt, &b));
		TU_OK(xdm_reap_pending(rt));
		ck_assert_uint_eq(bottom_attr(rt, "bytes_current"), 0);
		ck_assert_uint_eq(bottom_attr(rt, "allocations_total"), 2);
		ck_assert_uint_eq(bottom_attr(rt, "bytes_peak"), 3 * MIB + 5000);
		ck_assert_uint_eq(xdm_bytes_outstanding(rt), 0);
		if (std::strcmp(r, "pool") == 0)
			ck_assert_uint_ge(bottom_attr(rt, "pool_size"), 3 * MIB);
		TU_OK(xdm_runtime_destroy(rt));
	}
}
END_TEST

START_TEST(budget_over_rmm_pool)
{
	std::string key = budget_key("pool");
	struct xdm_runtime *rt = make("budget key=" + key + " limit=4M credit=0 | "
				      "rmm resource=pool initial=2M");
	struct xdm_block a, b;
	enum xdm_status st;

	TU_OK(xdm_allocate(rt, 3 * MIB, 0, "a", &a));
	st = xdm_allocate(rt, 2 * MIB, 0, "b", &b);
	ck_assert_int_eq(st, XDM_E_OUT_OF_BUDGET);
	ck_assert_uint_eq(xdm_last_error()->requested, 2 * MIB);
	/* RMM never saw the refused request. */
	ck_assert_uint_eq(bottom_attr(rt, "allocations_total"), 1);
	ck_assert_uint_eq(bottom_attr(rt, "bytes_current"), 3 * MIB);
	TU_OK(xdm_deallocate(rt, &a));
	TU_OK(xdm_allocate(rt, 4 * MIB, 1, "b", &b));
	TU_OK(xdm_deallocate(rt, &b));
	char used[64];
	TU_OK(xdm_layer_attr_show(rt, 0, "used", used, sizeof(used)));
	ck_assert_uint_eq(std::strtoull(used, nullptr, 10), 0);
	TU_OK(xdm_runtime_destroy(rt));
}
END_TEST

START_TEST(rapids_lifecycle)
{
	std::string key = budget_key("rapids");
	struct xdm_runtime *rt = make("budget key=" + key + " limit=16M credit=0 | pool | "
				      "cuda_async");
	xdm::rmm_resource mr(rt, "rapids");
	rmm::mr::device_memory_resource *before = rmm::mr::set_current_device_resource(&mr);
	cudaStream_t s1, s2;
	struct xdm_stats st;
	struct xdm_block blk;

	CUDA_OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
	CUDA_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	{
		rmm::device_buffer buf(MIB, rmm::cuda_stream_view(s1));
		rmm::device_uvector<int> v(1000, rmm::cuda_stream_view(s2));

		/* Both are blocks of the runtime, tagged, on RMM's streams. */
		TU_OK(xdm_native_lookup(rt, buf.data(), &blk));
		ck_assert_str_eq(blk.tag, "rapids");
		ck_assert_uint_ge(blk.bytes, MIB);
		TU_OK(xdm_native_lookup(rt, v.data(), &blk));
		ck_assert_uint_ge(blk.bytes, 1000 * sizeof(int));
		/* ...and in the tree, tag and all. */
		char *text = nullptr;
		std::size_t len = 0;
		std::string path = std::string(xdm_runtime_name(rt)) + "/blocks/" +
				   std::to_string(blk.generation) + "/tag";
		ck_assert_int_eq(xdm_tree_show(path.c_str(), &text, &len), 0);
		ck_assert_str_eq(text, "rapids\n");
		std::free(text);
		xdm_runtime_stats(rt, &st);
		ck_assert_uint_eq(st.blocks_outstanding, 2);

		CUDA_OK(cudaMemsetAsync(buf.data(), 7, MIB, s1));
		CUDA_OK(cudaMemsetAsync(v.data(), 0, 1000 * sizeof(int), s2));
		/* A resize is a new block and a copy, the old block freed on s1. */
		buf.resize(2 * MIB, rmm::cuda_stream_view(s1));
		CUDA_OK(cudaStreamSynchronize(s1));
		ck_assert_uint_eq(count_bytes(buf.data(), MIB, 7), MIB);
		v.resize(4000, rmm::cuda_stream_view(s2));
		CUDA_OK(cudaStreamSynchronize(s2));
		ck_assert_uint_eq(count_bytes(v.data(), 1000 * sizeof(int), 0),
				  1000 * sizeof(int));
		xdm_runtime_stats(rt, &st);
		ck_assert_uint_eq(st.blocks_outstanding, 2);

		/* Past the budget: RMM's out_of_memory, with xdm's sentence. */
		bool refused = false;
		try {
			rmm::device_buffer big(32 * MIB, rmm::cuda_stream_view(s1));
		} catch (const rmm::out_of_memory &e) {
			refused = std::strstr(e.what(), "budget") != nullptr;
			ck_assert_msg(refused, "the refusal does not say budget: %s", e.what());
		}
		ck_assert(refused);
		xdm_runtime_stats(rt, &st);
		ck_assert_uint_eq(st.blocks_outstanding, 2);
	}
	CUDA_OK(cudaStreamSynchronize(s1));
	CUDA_OK(cudaStreamSynchronize(s2));
	xdm_runtime_stats(rt, &st);
	ck_assert_uint_eq(st.blocks_outstanding, 0);
	ck_assert_uint_eq(st.allocs, 4);
	rmm::mr::set_current_device_resource(before);
	/* The runtime imported RMM's streams: they outlive it (xdm(3)). */
	TU_OK(xdm_runtime_destroy(rt));
	CUDA_OK(cudaStreamDestroy(s1));
	CUDA_OK(cudaStreamDestroy(s2));
}
END_TEST

int main()
{
	int devices = 0;

	if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
		std::printf("SKIP: no CUDA device here\n");
		return 77;
	}
	ct_take_gpu_lock();
	/* An empty XDM_MOUNT turns the configured mount off. */
	setenv("XDM_MOUNT", "", 1);

	Suite *s = suite_create("rmm_cuda");
	TCase *tc = tcase_create("rmm");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, backend_serves_streams);
	tcase_add_test(tc, budget_over_rmm_pool);
	tcase_add_test(tc, rapids_lifecycle);
	suite_add_tcase(s, tc);

	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
