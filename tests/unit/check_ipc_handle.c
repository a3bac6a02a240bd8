/* SPDX-License-Identifier: MIT */
/*
 * check_ipc_handle.c - an IPC handle's bytes (core/ipc_handle.c): encode
 * and decode round trip, and every rule of decode, one at a time.
 *
 * Links core/libxdmcore.la, not libxdm: xdm_ipc_encode() and
 * xdm_ipc_decode() are internal to the library.  The handles this suite
 * forges are sealed with an FNV-1a 64 of its own, written from the layout
 * that ipc_handle.c documents, so that each field rule is reached past the
 * checksum and the checksum itself is checked against the documentation,
 * not against the code under test.
 */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "tests/lib/testutil.h"

/* The documented layout (ipc_handle.c's header), spelled out again here. */
enum {
	H_VERSION = 8,
	H_KIND = 12,
	H_TOKEN = 16,
	H_GENERATION = 24,
	H_PTR = 32,
	H_BYTES = 40,
	H_OFFSET = 48,
	H_OBJECT = 56,
	H_PID = 64,
	H_PAYLOAD_LEN = 68,
	H_UUID = 72,
	H_PAYLOAD = 112,
	H_ZEROS = 208,
	H_CHECKSUM = 248,
};

static const unsigned char mark[8] = { 'x', 'd', 'm', 'i', 'p', 'c', 0, 1 };

static const char uuid_a[] = "GPU-3f1c9a7e-52d4-4b8e-a0c1";
/* The longest a handle holds: 39 characters and the NUL. */
static const char uuid_max[] = "host-0123456789abcdef0123456789abcdef01";
_Static_assert(sizeof(uuid_max) == 40, "uuid_max fills a handle's place");

static void le_put(unsigned char *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t le_get(const unsigned char *p, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static uint64_t fnv1a64(const unsigned char *p, size_t n)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);

	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= UINT64_C(0x100000001b3);
	}
	return h;
}

/* A forged handle made whole again: its checksum over what it now says. */
static void reseal(struct xdm_ipc_handle *h)
{
	le_put(h->bytes + H_CHECKSUM, fnv1a64(h->bytes, H_CHECKSUM), 8);
}

/*
 * A block as an exporter would describe it, every field distinct and
 * using its high bits, so that a field written to the wrong place or cut
 * to fewer bytes cannot read back the same.
 */
static struct xdm_ipc_ref sample_ref(uint32_t kind, uint32_t payload_len)
{
	struct xdm_ipc_ref r;

	memset(&r, 0, sizeof(r));
	snprintf(r.uuid, sizeof(r.uuid), "%s", uuid_a);
	r.token = UINT64_C(0x8123456789abcdef);
	r.exporter_pid = UINT32_C(0x89abcdef);
	r.generation = UINT64_C(0xfedcba9876543210);
	r.ptr = UINT64_C(0x7f1234567000);
	r.bytes = UINT64_C(3) << 12;
	r.obj.kind = kind;
	r.obj.payload_len = payload_len;
	r.obj.fd = 42;	/* never in a handle: decode must say -1 */
	r.obj.offset = UINT64_C(2) << 12;
	r.obj.object_bytes = UINT64_C(1) << 40;
	for (uint32_t i = 0; i < payload_len; i++)
		r.obj.payload[i] = (unsigned char)(0xa0 + i);
	return r;
}

static struct xdm_ipc_handle good_handle(uint32_t kind, uint32_t payload_len)
{
	struct xdm_ipc_ref r = sample_ref(kind, payload_len);
	struct xdm_ipc_handle h;

	memset(&h, 0xee, sizeof(h));
	xdm_ipc_encode(&r, &h);
	return h;
}

/* What decode's output holds before a call that must not write it. */
static void sentinel(struct xdm_ipc_ref *r)
{
	memset(r, 0x5c, sizeof(*r));
}

/*
 * h must be refused as INVALID, with a sentence that says word (when not
 * NULL), and with *out as it was.  what names the case in a failure.
 */
static void expect_invalid(const struct xdm_ipc_handle *h, const char *word, const char *what)
{
	struct xdm_ipc_ref out, before;
	enum xdm_status st;
	const char *m;

	sentinel(&out);
	sentinel(&before);
	st = xdm_ipc_decode(h, &out);
	m = xdm_last_error_message();
	ck_assert_msg(st == XDM_E_INVALID, "%s: decode gave %d (%s), not INVALID", what, st,
		      xdm_strerror(st));
	ck_assert_int_eq(xdm_last_error()->code, XDM_E_INVALID);
	ck_assert_msg(m && *m, "%s: no sentence", what);
	if (word)
		ck_assert_msg(strstr(m, word), "%s: the sentence does not say '%s': %s", what,
			      word, m);
	ck_assert_msg(!memcmp(&out, &before, sizeof(out)), "%s: a refused decode wrote its output",
		      what);
}

static void decode_ok(const struct xdm_ipc_handle *h, struct xdm_ipc_ref *out, const char *what)
{
	enum xdm_status st = xdm_ipc_decode(h, out);

	ck_assert_msg(st == XDM_OK, "%s: decode gave %d: %s", what, st, xdm_last_error_message());
}

/* ---- round trip --------------------------------------------------------- */

static void round_trip(uint32_t kind, uint32_t payload_len, const char *uuid)
{
	struct xdm_ipc_ref r = sample_ref(kind, payload_len), back;
	struct xdm_ipc_handle h1, h2, h3;
	const unsigned char *p = h1.bytes;

	snprintf(r.uuid, sizeof(r.uuid), "%s", uuid);
	memset(&h1, 0x11, sizeof(h1));
	memset(&h2, 0x22, sizeof(h2));
	xdm_ipc_encode(&r, &h1);
	xdm_ipc_encode(&r, &h2);
	ck_assert_msg(!memcmp(&h1, &h2, sizeof(h1)), "one ref encoded twice differs");

	/* The bytes are where the documentation says, little-endian. */
	ck_assert(!memcmp(p, mark, sizeof(mark)));
	ck_assert_uint_eq(le_get(p + H_VERSION, 4), 1);
	ck_assert_uint_eq(le_get(p + H_KIND, 4), kind);
	ck_assert_uint_eq(le_get(p + H_TOKEN, 8), r.token);
	ck_assert_uint_eq(le_get(p + H_GENERATION, 8), r.generation);
	ck_assert_uint_eq(le_get(p + H_PTR, 8), r.ptr);
	ck_assert_uint_eq(le_get(p + H_BYTES, 8), r.bytes);
	ck_assert_uint_eq(le_get(p + H_OFFSET, 8), r.obj.offset);
	ck_assert_uint_eq(le_get(p + H_OBJECT, 8), r.obj.object_bytes);
	ck_assert_uint_eq(le_get(p + H_PID, 4), r.exporter_pid);
	ck_assert_uint_eq(le_get(p + H_PAYLOAD_LEN, 4), payload_len);
	ck_assert_str_eq((const char *)p + H_UUID, uuid);
	for (int i = H_PAYLOAD + (int)payload_len; i < H_CHECKSUM; i++)
		ck_assert_msg(!p[i], "byte %d is 0x%02x, not zero", i, p[i]);
	ck_assert_uint_eq(le_get(p + H_CHECKSUM, 8), fnv1a64(p, H_CHECKSUM));

	sentinel(&back);
	decode_ok(&h1, &back, "a fresh handle");
	ck_assert_str_eq(back.uuid, uuid);
	ck_assert_uint_eq(back.token, r.token);
	ck_assert_uint_eq(back.exporter_pid, r.exporter_pid);
	ck_assert_uint_eq(back.generation, r.generation);
	ck_assert_uint_eq(back.ptr, r.ptr);
	ck_assert_uint_eq(back.bytes, r.bytes);
	ck_assert_uint_eq(back.obj.kind, kind);
	ck_assert_uint_eq(back.obj.payload_len, payload_len);
	ck_assert_int_eq(back.obj.fd, -1);
	ck_assert_uint_eq(back.obj.offset, r.obj.offset);
	ck_assert_uint_eq(back.obj.object_bytes, r.obj.object_bytes);
	ck_assert(!memcmp(back.obj.payload, r.obj.payload, payload_len));

	/* What decode gave encodes to the very same bytes. */
	xdm_ipc_encode(&back, &h3);
	ck_assert_msg(!memcmp(&h1, &h3, sizeof(h1)), "decode then encode changed the handle");
}

START_TEST(test_round_trip)
{
	static const uint32_t kinds[] = { XDM_IPC_FD, XDM_IPC_BYTES, XDM_IPC_FDS };
	static const uint32_t lens[] = { 0, 1, XDM_IPC_PAYLOAD_MAX };

	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
		for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
			round_trip(kinds[k], lens[l], uuid_a);
			round_trip(kinds[k], lens[l], uuid_max);
		}
}
END_TEST

/* A block that ends exactly where its object ends, or is all of it. */
START_TEST(test_round_trip_edges)
{
	struct xdm_ipc_ref r = sample_ref(XDM_IPC_FD, 0), back;
	struct xdm_ipc_handle h;

	r.obj.offset = r.obj.object_bytes - r.bytes;
	xdm_ipc_encode(&r, &h);
	decode_ok(&h, &back, "a block at its object's end");
	ck_assert_uint_eq(back.obj.offset, r.obj.offset);

	r.obj.offset = 0;
	r.bytes = r.obj.object_bytes = UINT64_MAX;
	r.token = r.generation = UINT64_MAX;
	r.exporter_pid = UINT32_MAX;
	xdm_ipc_encode(&r, &h);
	decode_ok(&h, &back, "the largest values");
	ck_assert_uint_eq(back.bytes, UINT64_MAX);
	ck_assert_uint_eq(back.obj.object_bytes, UINT64_MAX);
	ck_assert_uint_eq(back.token, UINT64_MAX);
	ck_assert_uint_eq(back.generation, UINT64_MAX);
	ck_assert_uint_eq(back.exporter_pid, UINT32_MAX);
}
END_TEST

/* The suite's own seal agrees with encode's: the forged cases below rest on it. */
START_TEST(test_reseal_matches_encode)
{
	struct xdm_ipc_handle h = good_handle(XDM_IPC_BYTES, 17), again = h;
	struct xdm_ipc_ref back;

	reseal(&again);
	ck_assert(!memcmp(&h, &again, sizeof(h)));
	decode_ok(&again, &back, "a resealed good handle");
}
END_TEST

/* ---- damage ------------------------------------------------------------- */

START_TEST(test_every_byte_flip)
{
	static const unsigned char masks[] = { 0x01, 0x80 };
	const struct xdm_ipc_handle good = good_handle(XDM_IPC_BYTES, 40);
	char what[64];

	for (int i = 0; i < XDM_IPC_HANDLE_SIZE; i++)
		for (size_t m = 0; m < sizeof(masks); m++) {
			struct xdm_ipc_handle h = good;
			/* The mark and the version are read first; the checksum
			 * catches any other single change (FNV-1a's steps are
			 * one-to-one, so one byte changed changes the sum). */
			const char *word = i < H_VERSION ? "mark" :
					   i < H_KIND ? "version" : "checksum";

			h.bytes[i] ^= masks[m];
			snprintf(what, sizeof(what), "byte %d ^ 0x%02x", i, masks[m]);
			expect_invalid(&h, word, what);
		}
}
END_TEST

START_TEST(test_cut_short)
{
	static const int cuts[] = { 0, 1, 7, 8, 12, 16, 40, 64, 72, 100, 112, 150,
				    207, 208, 247, 248, 250, 252, 255 };
	const struct xdm_ipc_handle good = good_handle(XDM_IPC_FD, XDM_IPC_PAYLOAD_MAX);
	int changed = 0;
	char what[64];

	for (size_t c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
		struct xdm_ipc_handle h = good;

		memset(h.bytes + cuts[c], 0, sizeof(h.bytes) - (size_t)cuts[c]);
		/* A tail of the checksum may already be zero: then nothing was cut. */
		if (!memcmp(&h, &good, sizeof(h)))
			continue;
		changed++;
		snprintf(what, sizeof(what), "cut at %d", cuts[c]);
		expect_invalid(&h, NULL, what);
	}
	/* Every cut before the checksum changes the handle. */
	ck_assert_int_ge(changed, 16);
}
END_TEST

START_TEST(test_zeros_and_garbage)
{
	struct xdm_ipc_handle h;
	uint64_t x = UINT64_C(0x9e3779b97f4a7c15);

	memset(&h, 0, sizeof(h));
	expect_invalid(&h, "mark", "all zeros");

	for (int n = 0; n < 2000; n++) {
		for (int i = 0; i < XDM_IPC_HANDLE_SIZE; i++) {
			/* xorshift64: any garbage will do, the same on every run. */
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			h.bytes[i] = (unsigned char)(x >> 24);
		}
		expect_invalid(&h, "mark", "garbage");
		/* With the mark and layout right, the checksum still stops it. */
		memcpy(h.bytes, mark, sizeof(mark));
		le_put(h.bytes + H_VERSION, 1, 4);
		expect_invalid(&h, "checksum", "garbage after a mark");
	}
}
END_TEST

/* ---- each field rule, past a valid checksum ------------------------------ */

/* A good handle with one u32 or u64 field rewritten, sealed again. */
static struct xdm_ipc_handle forged(int at, int n, uint64_t v)
{
	struct xdm_ipc_handle h = good_handle(XDM_IPC_FD, 24);

	le_put(h.bytes + at, v, n);
	reseal(&h);
	return h;
}

START_TEST(test_rule_version)
{
	struct xdm_ipc_handle h = forged(H_VERSION, 4, 2);

	expect_invalid(&h, "version 2", "version 2");
	h = forged(H_VERSION, 4, 0);
	expect_invalid(&h, "version 0", "version 0");
	h = forged(H_VERSION, 4, UINT32_MAX);
	expect_invalid(&h, "version 4294967295", "version 2^32-1");
}
END_TEST

START_TEST(test_rule_kind)
{
	static const uint64_t kinds[] = { 0, 4, 7, UINT32_MAX };

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		struct xdm_ipc_handle h = forged(H_KIND, 4, kinds[i]);

		expect_invalid(&h, "kind", "an unknown kind");
	}
}
END_TEST

START_TEST(test_rule_zero_ids)
{
	struct xdm_ipc_handle h = forged(H_TOKEN, 8, 0);

	expect_invalid(&h, "runtime", "token 0");
	h = forged(H_GENERATION, 8, 0);
	expect_invalid(&h, "block", "generation 0");
	h = forged(H_BYTES, 8, 0);
	expect_invalid(&h, "bytes", "bytes 0");
}
END_TEST

START_TEST(test_rule_inside_object)
{
	struct xdm_ipc_ref r = sample_ref(XDM_IPC_FD, 0);
	struct xdm_ipc_handle h;
	uint64_t edge = r.obj.object_bytes - r.bytes;

	/* One byte past the object's end. */
	h = forged(H_OFFSET, 8, edge + 1);
	expect_invalid(&h, "memory object", "offset one past");
	/* A block larger than its object. */
	h = forged(H_OBJECT, 8, r.bytes - 1);
	expect_invalid(&h, "memory object", "object smaller than the block");
	/* offset + bytes wraps around 2^64 to something small. */
	h = forged(H_OFFSET, 8, UINT64_MAX);
	expect_invalid(&h, "memory object", "offset UINT64_MAX");
	h = forged(H_OFFSET, 8, UINT64_MAX - r.bytes + 1);
	expect_invalid(&h, "memory object", "offset + bytes == 2^64");
	h = forged(H_BYTES, 8, UINT64_MAX);
	expect_invalid(&h, "memory object", "bytes UINT64_MAX");
	/* The edge itself is a block: the forger is right there. */
	h = forged(H_OFFSET, 8, edge);
	decode_ok(&h, &r, "a block at its object's end");
}
END_TEST

START_TEST(test_rule_payload_len)
{
	static const uint64_t lens[] = { XDM_IPC_PAYLOAD_MAX + 1, 200, UINT32_MAX };

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		struct xdm_ipc_handle h = forged(H_PAYLOAD_LEN, 4, lens[i]);

		expect_invalid(&h, "payload", "payload too long");
	}
}
END_TEST

START_TEST(test_rule_uuid)
{
	struct xdm_ipc_handle h = good_handle(XDM_IPC_FD, 0);
	struct xdm_ipc_ref r;

	memset(h.bytes + H_UUID, 0, 40);
	reseal(&h);
	expect_invalid(&h, "device", "no uuid");

	h = good_handle(XDM_IPC_FD, 0);
	memset(h.bytes + H_UUID, 'a', 40);
	reseal(&h);
	expect_invalid(&h, "device", "a uuid with no NUL");

	/* A NUL only in the last place is the longest uuid there is. */
	h.bytes[H_UUID + 39] = 0;
	reseal(&h);
	decode_ok(&h, &r, "a 39-character uuid");
	ck_assert_uint_eq(strlen(r.uuid), 39);
}
END_TEST

/*
 * Bytes after the uuid's NUL: encode writes zeros there, so a handle with
 * anything else is not one encode made, and two handles of one block
 * would differ.
 */
START_TEST(test_rule_uuid_tail)
{
	static const int at[] = { sizeof(uuid_a), sizeof(uuid_a) + 1, 39 };

	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		struct xdm_ipc_handle h = good_handle(XDM_IPC_FD, 0);

		h.bytes[H_UUID + at[i]] = 'x';
		reseal(&h);
		expect_invalid(&h, "zero", "a byte after the uuid's NUL");
	}
}
END_TEST

START_TEST(test_rule_zero_area)
{
	static const int at[] = { H_ZEROS, H_ZEROS + 1, 230, H_CHECKSUM - 1 };
	static const uint32_t lens[] = { 0, 24, XDM_IPC_PAYLOAD_MAX };
	char what[64];

	for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
		for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
			struct xdm_ipc_handle h = good_handle(XDM_IPC_BYTES, lens[l]);

			h.bytes[at[i]] = 0x80;
			reseal(&h);
			snprintf(what, sizeof(what), "byte %d with payload %u", at[i], lens[l]);
			expect_invalid(&h, "zero", what);
		}
		/* Inside the payload's place, past its length. */
		if (lens[l] < XDM_IPC_PAYLOAD_MAX) {
			int past[] = { H_PAYLOAD + (int)lens[l], H_ZEROS - 1 };

			for (size_t i = 0; i < 2; i++) {
				struct xdm_ipc_handle h = good_handle(XDM_IPC_BYTES, lens[l]);

				h.bytes[past[i]] = 1;
				reseal(&h);
				snprintf(what, sizeof(what), "payload byte %d past length %u",
					 past[i] - H_PAYLOAD, lens[l]);
				expect_invalid(&h, "zero", what);
			}
		}
	}
}
END_TEST

/* ---- the socket's name --------------------------------------------------- */

START_TEST(test_socket_name)
{
	/* A NUL, "xdm-ipc-", 16 hex digits. */
	const size_t want = 1 + 8 + 16;
	char buf[64];

	memset(buf, 'z', sizeof(buf));
	ck_assert_uint_eq(xdm_ipc_socket_name(UINT64_C(0x0123456789abcdef), buf, sizeof(buf)),
			  want);
	ck_assert_int_eq(buf[0], '\0');
	ck_assert(!memcmp(buf + 1, "xdm-ipc-", 8));
	ck_assert(!memcmp(buf + 9, "0123456789abcdef", 16));
	ck_assert_int_eq(buf[want], '\0');

	/* Zero-padded to 16 digits, whatever the token. */
	ck_assert_uint_eq(xdm_ipc_socket_name(1, buf, sizeof(buf)), want);
	ck_assert(!memcmp(buf + 9, "0000000000000001", 16));
	ck_assert_uint_eq(xdm_ipc_socket_name(UINT64_MAX, buf, sizeof(buf)), want);
	ck_assert(!memcmp(buf + 9, "ffffffffffffffff", 16));
	for (size_t i = 9; i < want; i++)
		ck_assert_msg((buf[i] >= '0' && buf[i] <= '9') || (buf[i] >= 'a' && buf[i] <= 'f'),
			      "'%c' is not a hex digit", buf[i]);

	/* Exactly enough room: the name and its NUL. */
	ck_assert_uint_eq(xdm_ipc_socket_name(7, buf, want + 1), want);
	/* Any less is no name at all, never a shorter one. */
	ck_assert_uint_eq(xdm_ipc_socket_name(7, buf, want), 0);
	ck_assert_uint_eq(xdm_ipc_socket_name(7, buf, 8), 0);
	ck_assert_uint_eq(xdm_ipc_socket_name(7, buf, 1), 0);
	ck_assert_uint_eq(xdm_ipc_socket_name(7, NULL, 0), 0);
}
END_TEST

static Suite *ipc_handle_suite(void)
{
	Suite *s = suite_create("ipc_handle");
	TCase *trip = tcase_create("round_trip");
	TCase *damage = tcase_create("damage");
	TCase *rules = tcase_create("rules");
	TCase *name = tcase_create("socket_name");

	tcase_add_test(trip, test_round_trip);
	tcase_add_test(trip, test_round_trip_edges);
	tcase_add_test(trip, test_reseal_matches_encode);
	suite_add_tcase(s, trip);

	tcase_add_test(damage, test_every_byte_flip);
	tcase_add_test(damage, test_cut_short);
	tcase_add_test(damage, test_zeros_and_garbage);
	suite_add_tcase(s, damage);

	tcase_add_test(rules, test_rule_version);
	tcase_add_test(rules, test_rule_kind);
	tcase_add_test(rules, test_rule_zero_ids);
	tcase_add_test(rules, test_rule_inside_object);
	tcase_add_test(rules, test_rule_payload_len);
	tcase_add_test(rules, test_rule_uuid);
	tcase_add_test(rules, test_rule_uuid_tail);
	tcase_add_test(rules, test_rule_zero_area);
	suite_add_tcase(s, rules);

	tcase_add_test(name, test_socket_name);
	suite_add_tcase(s, name);
	return s;
}

int main(void)
{
	return tu_run_suite(ipc_handle_suite());
}
