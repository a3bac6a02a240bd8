// SPDX-License-Identifier: MIT
/*
 * rmm_calls.hpp - allocate and deallocate on an RMM resource whichever RMM
 * the headers are: 25.12 orders the arguments (stream, pointer, bytes) and
 * keeps the older (bytes, stream) only behind a macro; 25.10 has only the
 * older.  Shared by the rmm backend and xdm-rmm-bench.
 */
#ifndef XDM_BACKENDS_RMM_CALLS_HPP
#define XDM_BACKENDS_RMM_CALLS_HPP

#include <cstddef>

#include <rmm/cuda_stream_view.hpp>

namespace xdm_rmm {

template <class R>
auto allocate_on(R &r, std::size_t bytes, rmm::cuda_stream_view s, int)
	-> decltype(r.allocate(s, bytes))
{
	return r.allocate(s, bytes);
}

template <class R>
void *allocate_on(R &r, std::size_t bytes, rmm::cuda_stream_view s, long)
{
	return r.allocate(bytes, s);
}

template <class R>
auto deallocate_on(R &r, void *p, std::size_t bytes, rmm::cuda_stream_view s, int)
	-> decltype(r.deallocate(s, p, bytes))
{
	r.deallocate(s, p, bytes);
}

template <class R>
void deallocate_on(R &r, void *p, std::size_t bytes, rmm::cuda_stream_view s, long)
{
	r.deallocate(p, bytes, s);
}

/* The call that fits: the newer order where the headers have it. */
template <class R>
void *allocate(R &r, std::size_t bytes, rmm::cuda_stream_view s)
{
	return allocate_on(r, bytes, s, 0);
}

template <class R>
void deallocate(R &r, void *p, std::size_t bytes, rmm::cuda_stream_view s)
{
	deallocate_on(r, p, bytes, s, 0);
}

} // namespace xdm_rmm

#endif
