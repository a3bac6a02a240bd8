// SPDX-License-Identifier: MIT
/*
 * xdm/rmm.hpp - an RMM memory resource over an xdm runtime, header only.
 *
 * A C++ program or library that allocates through RMM (RAPIDS Memory
 * Manager) puts everything RMM allocates under xdm with two lines:
 *
 *     xdm::rmm_resource mr;                       // the runtime of device 0
 *     rmm::mr::set_current_device_resource(&mr);
 *
 * Every device_buffer, device_uvector and container RMM makes is then a
 * block of the xdm runtime, allocated and freed on the stream RMM names:
 * charged to the budget, logged, visible in the tree.  A refusal (the
 * budget, a pool's max, the device) is RMM's out_of_memory with xdm's
 * sentence; any other error is rmm::bad_alloc.
 *
 * The class derives from rmm::mr::device_memory_resource (RMM 25.x and
 * 26.0x, the releases that have it).  It is compiled with the program's own
 * RMM headers: xdm itself is built without RMM (see xdm-rmm(7)).  Link the
 * program with -lxdm.
 */
#ifndef XDM_RMM_HPP
#define XDM_RMM_HPP

#include <cstddef>
#include <string>

#include <cuda_runtime_api.h>

#if __has_include(<rmm/mr/device_memory_resource.hpp>)
#include <rmm/mr/device_memory_resource.hpp>
#else
#include <rmm/mr/device/device_memory_resource.hpp>
#endif
#include <rmm/cuda_stream_view.hpp>
#include <rmm/error.hpp>

#include <xdm/xdm.h>

namespace xdm {

class rmm_resource final : public rmm::mr::device_memory_resource {
public:
	/* The process-wide runtime of a device (xdm_runtime_get). */
	explicit rmm_resource(unsigned int device = 0) : rt_(nullptr), tag_(nullptr)
	{
		if (xdm_runtime_get(device, &rt_) != XDM_OK)
			throw rmm::logic_error(std::string("xdm: no runtime for device ") +
					       std::to_string(device) + ": " +
					       xdm_last_error_message());
	}

	/*
	 * A runtime the caller made (xdm_runtime_create) and keeps alive for
	 * as long as any block of this resource is; tag, if given, names every
	 * block in the tree and the log (it must outlive them: a literal, or
	 * xdm_tag_intern()).  The runtime imports every stream RMM names and
	 * synchronizes them when it is destroyed: destroy it before them.
	 */
	explicit rmm_resource(struct xdm_runtime *rt, const char *tag = nullptr)
		: rt_(rt), tag_(tag)
	{
		if (!rt_)
			throw rmm::logic_error("xdm: rmm_resource over a NULL runtime");
	}

	rmm_resource(const rmm_resource &) = default;
	rmm_resource &operator=(const rmm_resource &) = default;
	~rmm_resource() override = default;

	struct xdm_runtime *runtime() const noexcept
	{
		return rt_;
	}

private:
	void *do_allocate(std::size_t bytes, rmm::cuda_stream_view stream) override
	{
		void *ptr = nullptr;
		enum xdm_status st = xdm_native_allocate(rt_, bytes, stream.value(), tag_, &ptr);

		if (st == XDM_OK)
			return ptr;
		std::string what = std::string("xdm: ") + std::to_string(bytes) + " bytes: " +
				   xdm_last_error_message();
		/* What a caller may recover from (free something, retry) is RMM's OOM. */
		if (st == XDM_E_OUT_OF_BUDGET || st == XDM_E_OUT_OF_MEMORY)
			throw rmm::out_of_memory(what);
		throw rmm::bad_alloc(what);
	}

	void do_deallocate(void *ptr, std::size_t, rmm::cuda_stream_view stream) noexcept override
	{
		/*
		 * RMM's deallocate cannot fail; a pointer xdm does not hold (freed
		 * twice, another resource's) is refused by xdm, which frees
		 * nothing and keeps the reason as the thread's last error.
		 */
		(void)xdm_native_free(rt_, ptr, stream.value());
	}

	bool do_is_equal(const rmm::mr::device_memory_resource &other) const noexcept override
	{
		const auto *o = dynamic_cast<const rmm_resource *>(&other);

		return o && o->rt_ == rt_;
	}

	struct xdm_runtime *rt_;
	const char *tag_;
};

} // namespace xdm

#endif
