// SPDX-License-Identifier: MIT
/*
 * rmm_bench.cpp - xdm-rmm-bench: what an allocate+free pair costs a RAPIDS
 * library that allocates through RMM, with xdm underneath and without.
 *
 * Each subject is an RMM resource, called as RAPIDS calls one (through
 * rmm::mr::device_memory_resource's allocate and deallocate, on one
 * stream):
 *
 *   xdm         xdm::rmm_resource (<xdm/rmm.hpp>) over a runtime of the
 *               stack given (--stack; default: budget | pool | cuda_async)
 *   cuda_async  RMM's cuda_async_memory_resource (the driver's pool)
 *   arena       RMM's arena_memory_resource over cuda_async
 *   pool        RMM's pool_memory_resource over cuda_async
 *
 * For each size the subjects run interleaved, round after round (a
 * machine's drift falls on all alike), n pairs a round after a warm-up
 * round; the table gives the median nanoseconds per pair over the rounds,
 * and each subject's ratio to RMM's arena.  Built only with --with-rmm.
 */
#include "config.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#if __has_include(<rmm/mr/device_memory_resource.hpp>)
#include <rmm/mr/arena_memory_resource.hpp>
#include <rmm/mr/cuda_async_memory_resource.hpp>
#include <rmm/mr/pool_memory_resource.hpp>
#else
#include <rmm/mr/device/arena_memory_resource.hpp>
#include <rmm/mr/device/cuda_async_memory_resource.hpp>
#include <rmm/mr/device/pool_memory_resource.hpp>
#endif

#include <xdm/rmm.hpp>
#include <xdm/xdm.h>

#include "backends/rmm/rmm_calls.hpp"

namespace {

using resource = rmm::mr::device_memory_resource;

struct options {
	std::string stack;
	std::vector<std::size_t> sizes{256, 4096, 65536, 1 << 20};
	long pairs = 20000;
	int rounds = 5;
};

struct subject {
	std::string name;
	resource *mr;
	std::vector<double> ns;		/* per pair, one entry a timed round */
};

void usage(const char *argv0)
{
	std::fprintf(stderr,
		     "usage: %s [--stack SPEC] [--sizes 256,4K,...] [-n PAIRS] [-r ROUNDS]\n",
		     argv0);
	std::exit(2);
}

std::size_t parse_size(const char *text)
{
	char *end;
	unsigned long long v = std::strtoull(text, &end, 10);

	switch (*end) {
	case 'K': v <<= 10; end++; break;
	case 'M': v <<= 20; end++; break;
	case 'G': v <<= 30; end++; break;
	default: break;
	}
	if (end == text || *end || v == 0) {
		std::fprintf(stderr, "xdm-rmm-bench: bad size '%s'\n", text);
		std::exit(2);
	}
	return v;
}

options parse(int argc, char **argv)
{
	options o;

	o.stack = "budget key=rmm-bench-" + std::to_string(getpid()) +
		  " limit=80% | pool | cuda_async";
	for (int i = 1; i < argc; i++) {
		std::string a = argv[i];

		if (i + 1 >= argc)
			usage(argv[0]);
		if (a == "--stack") {
			o.stack = argv[++i];
		} else if (a == "--sizes") {
			std::string list = argv[++i];

			o.sizes.clear();
			for (std::size_t at = 0; at <= list.size();) {
				std::size_t comma = list.find(',', at);
				std::string one = list.substr(at, comma == std::string::npos ?
							       std::string::npos : comma - at);

				o.sizes.push_back(parse_size(one.c_str()));
				if (comma == std::string::npos)
					break;
				at = comma + 1;
			}
		} else if (a == "-n") {
			o.pairs = std::atol(argv[++i]);
		} else if (a == "-r") {
			o.rounds = std::atoi(argv[++i]);
		} else {
			usage(argv[0]);
		}
	}
	if (o.pairs < 1 || o.rounds < 1)
		usage(argv[0]);
	return o;
}

/* Nanoseconds per pair over n pairs of bytes on stream s. */
double time_pairs(resource *mr, std::size_t bytes, long n, rmm::cuda_stream_view s)
{
	auto start = std::chrono::steady_clock::now();

	for (long i = 0; i < n; i++) {
		void *p = xdm_rmm::allocate(*mr, bytes, s);

		xdm_rmm::deallocate(*mr, p, bytes, s);
	}
	auto stop = std::chrono::steady_clock::now();
	return std::chrono::duration<double, std::nano>(stop - start).count() / n;
}

double median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	std::size_t m = v.size() / 2;

	return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

} // namespace

int main(int argc, char **argv)
{
	options o = parse(argc, argv);
	struct xdm_runtime *rt = nullptr;
	cudaStream_t stream;
	int devices = 0;

	if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
		std::fprintf(stderr, "xdm-rmm-bench: no CUDA device here\n");
		return 77;
	}
	if (xdm_runtime_create(0, "cuda", o.stack.c_str(), &rt) != XDM_OK) {
		std::fprintf(stderr, "xdm-rmm-bench: stack '%s': %s\n", o.stack.c_str(),
			     xdm_last_error_message());
		return 1;
	}
	if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
		std::fprintf(stderr, "xdm-rmm-bench: cannot create a stream\n");
		return 1;
	}
	rmm::cuda_stream_view s(stream);
	/* A row as soon as it is measured, into a pipe too. */
	std::setvbuf(stdout, nullptr, _IOLBF, 0);
	{
		xdm::rmm_resource over_xdm(rt, "rmm-bench");
		rmm::mr::cuda_async_memory_resource async;
		rmm::mr::arena_memory_resource<resource> arena(&async);
		rmm::mr::pool_memory_resource<resource> pool(&async, 0);
		std::vector<subject> subjects = {
			{"xdm", &over_xdm, {}}, {"cuda_async", &async, {}},
			{"arena", &arena, {}}, {"pool", &pool, {}},
		};

		std::printf("xdm-rmm-bench: %ld pairs a round, %d timed rounds after one warm-up; "
			    "xdm is '%s'\n\n", o.pairs, o.rounds, o.stack.c_str());
		std::printf("| size | xdm | cuda_async | arena | pool | xdm / arena |\n");
		std::printf("| --- | --- | --- | --- | --- | --- |\n");
		for (std::size_t bytes : o.sizes) {
			for (subject &sub : subjects) {
				sub.ns.clear();
				time_pairs(sub.mr, bytes, o.pairs, s);	/* warm-up */
			}
			for (int r = 0; r < o.rounds; r++)
				for (subject &sub : subjects)
					sub.ns.push_back(time_pairs(sub.mr, bytes, o.pairs, s));
			std::printf("| %zu B |", bytes);
			for (subject &sub : subjects)
				std::printf(" %.1f |", median(sub.ns));
			std::printf(" %.3f |\n", median(subjects[0].ns) / median(subjects[2].ns));
		}
		cudaStreamSynchronize(stream);
	}
	/* The runtime imported the stream: it must outlive the runtime (xdm(3)). */
	int rc = xdm_runtime_destroy(rt) == XDM_OK ? 0 : 1;

	cudaStreamDestroy(stream);
	return rc;
}
