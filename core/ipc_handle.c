/* SPDX-License-Identifier: MIT */
/*
 * ipc_handle.c - an IPC handle's bytes: written field by field in a fixed
 * little-endian layout, so that a handle means the same in any process of
 * any build, and read back with every field checked.
 *
 *	  0  mark "xdmipc\0\1"          8  version (u32)     12  kind (u32)
 *	 16  token (u64)               24  generation        32  ptr
 *	 40  bytes                     48  offset            56  object bytes
 *	 64  exporter pid (u32)        68  exporter uid (u32)
 *	 72  device UUID (40, NUL-terminated)
 *	112  secret (16)              128  zeros             248  checksum
 *
 * The secret is the handle's credential: 128 random bits the exporter drew
 * for this block's export, which its server compares (in constant time)
 * before it passes anything.  Everything else in a handle can be guessed
 * or read off the machine (the token is in /proc/net/unix), so a handle is
 * as secret as its secret, and whoever holds the bytes can open the block
 * if the exporter admits their user (ipc_allow).  What the driver needs to
 * map the memory (a legacy IPC handle, a pool's export data) is not in the
 * handle: the server sends it with the descriptors, to admitted peers only.
 *
 * The checksum (FNV-1a over bytes 0..247) catches a handle damaged or cut
 * short on its way; it is no protection against a forger, and needs none:
 * a forger lacks the secret.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "core/internal.h"

static const unsigned char MARK[8] = { 'x', 'd', 'm', 'i', 'p', 'c', 0, 1 };
static const unsigned char NO_SECRET[XDM_IPC_SECRET_BYTES];

enum {
	AT_VERSION = 8,
	AT_KIND = 12,
	AT_TOKEN = 16,
	AT_GENERATION = 24,
	AT_PTR = 32,
	AT_BYTES = 40,
	AT_OFFSET = 48,
	AT_OBJECT = 56,
	AT_PID = 64,
	AT_UID = 68,
	AT_UUID = 72,
	AT_SECRET = 112,
	AT_ZEROS = AT_SECRET + XDM_IPC_SECRET_BYTES,
	AT_CHECKSUM = XDM_IPC_HANDLE_SIZE - 8,
};

_Static_assert(AT_UUID + 40 == AT_SECRET, "the UUID fills its place");
_Static_assert(AT_ZEROS <= AT_CHECKSUM, "the secret fits before the checksum");

static void put(unsigned char *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get(const unsigned char *p, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static uint64_t checksum(const unsigned char *p)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (int i = 0; i < AT_CHECKSUM; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

void xdm_ipc_encode(const struct xdm_ipc_ref *r, struct xdm_ipc_handle *h)
{
	unsigned char *p = h->bytes;

	memset(p, 0, sizeof(h->bytes));
	memcpy(p, MARK, sizeof(MARK));
	put(p + AT_VERSION, XDM_IPC_VERSION, 4);
	put(p + AT_KIND, r->obj.kind, 4);
	put(p + AT_TOKEN, r->token, 8);
	put(p + AT_GENERATION, r->generation, 8);
	put(p + AT_PTR, r->ptr, 8);
	put(p + AT_BYTES, r->bytes, 8);
	put(p + AT_OFFSET, r->obj.offset, 8);
	put(p + AT_OBJECT, r->obj.object_bytes, 8);
	put(p + AT_PID, r->exporter_pid, 4);
	put(p + AT_UID, r->exporter_uid, 4);
	memcpy(p + AT_UUID, r->uuid, strnlen(r->uuid, 39));
	memcpy(p + AT_SECRET, r->secret, XDM_IPC_SECRET_BYTES);
	put(p + AT_CHECKSUM, checksum(p), 8);
}

static enum xdm_status bad(const char *what)
{
	return xdm_error_set(XDM_E_INVALID, "xdm_ipc_open: not a usable handle: %s", what);
}

enum xdm_status xdm_ipc_decode(const struct xdm_ipc_handle *h, struct xdm_ipc_ref *out)
{
	const unsigned char *p = h->bytes;
	struct xdm_ipc_ref r;
	uint64_t version;
	size_t uuid_len;

	if (memcmp(p, MARK, sizeof(MARK)) != 0)
		return bad("it does not start with an xdm handle's mark");
	version = get(p + AT_VERSION, 4);
	if (version != XDM_IPC_VERSION)
		return xdm_error_set(XDM_E_INVALID,
				     "xdm_ipc_open: the handle has layout version %llu; this xdm "
				     "reads version %d: both processes must run the same xdm",
				     (unsigned long long)version, XDM_IPC_VERSION);
	if (get(p + AT_CHECKSUM, 8) != checksum(p))
		return bad("its checksum does not match (damaged or cut short on its way)");
	memset(&r, 0, sizeof(r));
	r.obj.kind = (uint32_t)get(p + AT_KIND, 4);
	r.token = get(p + AT_TOKEN, 8);
	r.generation = get(p + AT_GENERATION, 8);
	r.ptr = get(p + AT_PTR, 8);
	r.bytes = get(p + AT_BYTES, 8);
	r.obj.offset = get(p + AT_OFFSET, 8);
	r.obj.object_bytes = get(p + AT_OBJECT, 8);
	r.exporter_pid = (uint32_t)get(p + AT_PID, 4);
	r.exporter_uid = (uint32_t)get(p + AT_UID, 4);
	r.obj.fd = -1;
	if (r.obj.kind != XDM_IPC_FD && r.obj.kind != XDM_IPC_BYTES && r.obj.kind != XDM_IPC_FDS)
		return bad("it names no kind of memory this xdm knows");
	if (!r.token || !r.generation || !r.bytes)
		return bad("it names no runtime, no block, or no bytes");
	if (r.obj.object_bytes < r.bytes || r.obj.offset > r.obj.object_bytes - r.bytes)
		return bad("its block does not lie inside its memory object");
	uuid_len = strnlen((const char *)p + AT_UUID, 40);
	if (uuid_len == 0 || uuid_len == 40)
		return bad("it names no device");
	/* Encode leaves zeros after the UUID's NUL and after the secret: one
	 * block has one handle, and decode takes no other spelling of it. */
	for (int i = AT_UUID + (int)uuid_len; i < AT_SECRET; i++)
		if (p[i])
			return bad("bytes that must be zero are not");
	for (int i = AT_ZEROS; i < AT_CHECKSUM; i++)
		if (p[i])
			return bad("bytes that must be zero are not");
	memcpy(r.uuid, p + AT_UUID, 40);
	memcpy(r.secret, p + AT_SECRET, XDM_IPC_SECRET_BYTES);
	/* Encode never writes one: no exporter drew it. */
	if (xdm_ipc_secret_equal(r.secret, NO_SECRET))
		return bad("it carries no secret");
	*out = r;
	return XDM_OK;
}

bool xdm_ipc_secret_equal(const unsigned char *a, const unsigned char *b)
{
	/* Every byte is looked at whatever the first difference: how long
	 * the server takes to refuse tells nothing of how much was right. */
	volatile unsigned char diff = 0;

	for (int i = 0; i < XDM_IPC_SECRET_BYTES; i++)
		diff |= a[i] ^ b[i];
	return diff == 0;
}

size_t xdm_ipc_socket_name(uint64_t token, char *out, size_t len)
{
	int n;

	/* Abstract: a leading NUL, no file, gone with its last descriptor. */
	n = snprintf(out, len, "%cxdm-ipc-%016llx", 0, (unsigned long long)token);
	return n < 0 || (size_t)n >= len ? 0 : (size_t)n;
}
