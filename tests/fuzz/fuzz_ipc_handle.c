/* SPDX-License-Identifier: MIT */
/*
 * fuzz_ipc_handle.c - xdm_ipc_decode() on any 256 bytes.
 *
 * A handle reaches xdm_ipc_open() and the exporter's server from another
 * process, over whatever channel carried it, so the decoder meets any
 * bytes.  The first XDM_IPC_HANDLE_SIZE bytes of the input are the handle
 * (a shorter input is padded with zeros, as a handle cut short would be).
 * An accepted handle must be one that xdm_ipc_encode() writes: the ref it
 * decodes to encodes to the very same bytes, so one block has exactly one
 * handle.  Its block must lie inside its object and its payload fit.  A
 * refused one must be INVALID with a sentence, and leave the output alone.
 */
#include "config.h"

#include "core/internal.h"

#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct xdm_ipc_handle h, again;
	struct xdm_ipc_ref r, untouched;
	enum xdm_status st;
	const char *m;

	memset(&h, 0, sizeof(h));
	memcpy(h.bytes, data, size < sizeof(h.bytes) ? size : sizeof(h.bytes));
	memset(&r, 0x5c, sizeof(r));
	untouched = r;
	st = xdm_ipc_decode(&h, &r);
	if (st != XDM_OK) {
		m = xdm_last_error_message();
		FUZZ_ASSERT(st == XDM_E_INVALID, "status %d", st);
		FUZZ_ASSERT(m && *m, "refused with no sentence");
		FUZZ_ASSERT(!memcmp(&r, &untouched, sizeof(r)), "refused (%s) but wrote its output",
			    m);
		return 0;
	}
	FUZZ_ASSERT(r.obj.payload_len <= XDM_IPC_PAYLOAD_MAX, "payload_len %u",
		    r.obj.payload_len);
	FUZZ_ASSERT(r.bytes <= r.obj.object_bytes &&
		    r.obj.offset <= r.obj.object_bytes - r.bytes,
		    "block %llu + %llu outside its object of %llu",
		    (unsigned long long)r.obj.offset, (unsigned long long)r.bytes,
		    (unsigned long long)r.obj.object_bytes);
	FUZZ_ASSERT(r.obj.fd == -1, "fd %d", r.obj.fd);
	FUZZ_ASSERT(memchr(r.uuid, '\0', sizeof(r.uuid)) && r.uuid[0], "no device named");
	memset(&again, 0xa5, sizeof(again));
	xdm_ipc_encode(&r, &again);
	for (size_t i = 0; i < sizeof(h.bytes); i++)
		FUZZ_ASSERT(again.bytes[i] == h.bytes[i],
			    "accepted a handle that encodes differently: byte %zu is 0x%02x, "
			    "encode writes 0x%02x", i, h.bytes[i], again.bytes[i]);
	return 0;
}
