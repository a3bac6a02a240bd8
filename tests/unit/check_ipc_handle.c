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
	H_UID = 68,
	H_UUID = 72,
	H_SECRET = 112,
	H_ZEROS = 128,
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
static struct xdm_ipc_ref sample_ref(uint32_t kind)
{
	struct xdm_ipc_ref r;

	memset(&r, 0, sizeof(r));
	snprintf(r.uuid, sizeof(r.uuid), "%s", uuid_a);
	r.token = UINT64_C(0x8123456789abcdef);
	r.exporter_pid = UINT32_C(0x89abcdef);
	r.exporter_uid = UINT32_C(0x76543210);
	r.generation = UINT64_C(0xfedcba9876543210);
	r.ptr = UINT64_C(0x7f1234567000);
	r.bytes = UINT64_C(3) << 12;
	r.obj.kind = kind;
	r.obj.fd = 42;	/* never in a handle: decode must say -1 */
	r.obj.offset = UINT64_C(2) << 12;
	r.obj.object_bytes = UINT64_C(1) << 40;
	/* Never in a handle either: the exporter's reply brings it. */
	r.obj.payload_len = 24;
	for (uint32_t i = 0; i < r.obj.payload_len; i++)
		r.obj.payload[i] = (unsigned char)(0xa0 + i);
	for (int i = 0; i < XDM_IPC_SECRET_BYTES; i++)
		r.secret[i] = (unsigned char)(0x31 + 7 * i);
	return r;
}

static struct xdm_ipc_handle good_handle(uint32_t kind)
{
	struct xdm_ipc_ref r = sample_ref(kind);
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

static void round_trip(uint32_t kind, const char *uuid)
{
	struct xdm_ipc_ref r = sample_ref(kind), back;
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
	ck_assert_uint_eq(le_get(p + H_VERSION, 4), 2);
	ck_assert_uint_eq(le_get(p + H_KIND, 4), kind);
	ck_assert_uint_eq(le_get(p + H_TOKEN, 8), r.token);
	ck_assert_uint_eq(le_get(p + H_GENERATION, 8), r.generation);
	ck_assert_uint_eq(le_get(p + H_PTR, 8), r.ptr);
	ck_assert_uint_eq(le_get(p + H_BYTES, 8), r.bytes);
	ck_assert_uint_eq(le_get(p + H_OFFSET, 8), r.obj.offset);
	ck_assert_uint_eq(le_get(p + H_OBJECT, 8), r.obj.object_bytes);
	ck_assert_uint_eq(le_get(p + H_PID, 4), r.exporter_pid);
	ck_assert_uint_eq(le_get(p + H_UID, 4), r.exporter_uid);
	ck_assert_str_eq((const char *)p + H_UUID, uuid);
	ck_assert(!memcmp(p + H_SECRET, r.secret, XDM_IPC_SECRET_BYTES));
	for (int i = H_ZEROS; i < H_CHECKSUM; i++)
		ck_assert_msg(!p[i], "byte %d is 0x%02x, not zero", i, p[i]);
	ck_assert_uint_eq(le_get(p + H_CHECKSUM, 8), fnv1a64(p, H_CHECKSUM));

	sentinel(&back);
	decode_ok(&h1, &back, "a fresh handle");
	ck_assert_str_eq(back.uuid, uuid);
	ck_assert_uint_eq(back.token, r.token);
	ck_assert_uint_eq(back.exporter_pid, r.exporter_pid);
	ck_assert_uint_eq(back.exporter_uid, r.exporter_uid);
	ck_assert(!memcmp(back.secret, r.secret, XDM_IPC_SECRET_BYTES));
	ck_assert_uint_eq(back.generation, r.generation);
	ck_assert_uint_eq(back.ptr, r.ptr);
	ck_assert_uint_eq(back.bytes, r.bytes);
	ck_assert_uint_eq(back.obj.kind, kind);
	/* The driver's payload is not the handle's to carry. */
	ck_assert_uint_eq(back.obj.payload_len, 0);
	ck_assert_int_eq(back.obj.fd, -1);
	ck_assert_uint_eq(back.obj.offset, r.obj.offset);
	ck_assert_uint_eq(back.obj.object_bytes, r.obj.object_bytes);

	/* What decode gave encodes to the very same bytes. */
	xdm_ipc_encode(&back, &h3);
	ck_assert_msg(!memcmp(&h1, &h3, sizeof(h1)), "decode then encode changed the handle");
}

START_TEST(test_round_trip)
{
	static const uint32_t kinds[] = { XDM_IPC_FD, XDM_IPC_BYTES, XDM_IPC_FDS };

	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		round_trip(kinds[k], uuid_a);
		round_trip(kinds[k], uuid_max);
	}
}
END_TEST

/* A block that ends exactly where its object ends, or is all of it. */
START_TEST(test_round_trip_edges)
{
	struct xdm_ipc_ref r = sample_ref(XDM_IPC_FD), back;
	struct xdm_ipc_handle h;

	r.obj.offset = r.obj.object_bytes - r.bytes;
	xdm_ipc_encode(&r, &h);
	decode_ok(&h, &back, "a block at its object's end");
	ck_assert_uint_eq(back.obj.offset, r.obj.offset);

	r.obj.offset = 0;
	r.bytes = r.obj.object_bytes = UINT64_MAX;
	r.token = r.generation = UINT64_MAX;
	r.exporter_pid = r.exporter_uid = UINT32_MAX;
	memset(r.secret, 0xff, sizeof(r.secret));
	xdm_ipc_encode(&r, &h);
	decode_ok(&h, &back, "the largest values");
	ck_assert_uint_eq(back.bytes, UINT64_MAX);
	ck_assert_uint_eq(back.obj.object_bytes, UINT64_MAX);
	ck_assert_uint_eq(back.token, UINT64_MAX);
	ck_assert_uint_eq(back.generation, UINT64_MAX);
	ck_assert_uint_eq(back.exporter_pid, UINT32_MAX);
	ck_assert_uint_eq(back.exporter_uid, UINT32_MAX);
}
END_TEST

/* The suite's own seal agrees with encode's: the forged cases below rest on it. */
START_TEST(test_reseal_matches_encode)
{
	struct xdm_ipc_handle h = good_handle(XDM_IPC_BYTES), again = h;
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
	const struct xdm_ipc_handle good = good_handle(XDM_IPC_BYTES);
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
	static const int cuts[] = { 0, 1, 7, 8, 12, 16, 40, 64, 72, 100, 112, 120, 127,
				    128, 150, 247, 248, 250, 252, 255 };
	const struct xdm_ipc_handle good = good_handle(XDM_IPC_FD);
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
		le_put(h.bytes + H_VERSION, 2, 4);
		expect_invalid(&h, "checksum", "garbage after a mark");
	}
}
END_TEST

/* ---- each field rule, past a valid checksum ------------------------------ */

/* A good handle with one u32 or u64 field rewritten, sealed again. */
static struct xdm_ipc_handle forged(int at, int n, uint64_t v)
{
	struct xdm_ipc_handle h = good_handle(XDM_IPC_FD);

	le_put(h.bytes + at, v, n);
	reseal(&h);
	return h;
}

START_TEST(test_rule_version)
{
	struct xdm_ipc_handle h = forged(H_VERSION, 4, 1);

	/* The layout before the secret: refused, whatever it names. */
	expect_invalid(&h, "version 1", "version 1");
	h = forged(H_VERSION, 4, 3);
	expect_invalid(&h, "version 3", "version 3");
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
	struct xdm_ipc_ref r = sample_ref(XDM_IPC_FD);
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

/* A handle without its credential is no handle an exporter made. */
START_TEST(test_rule_secret)
{
	struct xdm_ipc_handle h = good_handle(XDM_IPC_FD);
	struct xdm_ipc_ref r;

	memset(h.bytes + H_SECRET, 0, XDM_IPC_SECRET_BYTES);
	reseal(&h);
	expect_invalid(&h, "secret", "an all-zero secret");
	/* One bit of it is a secret (a poor one, but the exporter judges that). */
	h.bytes[H_SECRET + XDM_IPC_SECRET_BYTES - 1] = 1;
	reseal(&h);
	decode_ok(&h, &r, "a secret of one bit");
}
END_TEST

/* The comparison the server makes: equal only when every byte is. */
START_TEST(test_secret_equal)
{
	unsigned char a[XDM_IPC_SECRET_BYTES], b[XDM_IPC_SECRET_BYTES];

	for (int i = 0; i < XDM_IPC_SECRET_BYTES; i++)
		a[i] = b[i] = (unsigned char)(0x5a ^ i);
	ck_assert(xdm_ipc_secret_equal(a, b));
	for (int i = 0; i < XDM_IPC_SECRET_BYTES; i++) {
		for (int bit = 0; bit < 8; bit++) {
			b[i] ^= (unsigned char)(1u << bit);
			ck_assert_msg(!xdm_ipc_secret_equal(a, b), "byte %d bit %d differs", i, bit);
			ck_assert_msg(!xdm_ipc_secret_equal(b, a), "byte %d bit %d differs", i, bit);
			b[i] ^= (unsigned char)(1u << bit);
		}
	}
	ck_assert(xdm_ipc_secret_equal(a, b));
}
END_TEST

START_TEST(test_rule_uuid)
{
	struct xdm_ipc_handle h = good_handle(XDM_IPC_FD);
	struct xdm_ipc_ref r;

	memset(h.bytes + H_UUID, 0, 40);
	reseal(&h);
	expect_invalid(&h, "device", "no uuid");

	h = good_handle(XDM_IPC_FD);
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
		struct xdm_ipc_handle h = good_handle(XDM_IPC_FD);

		h.bytes[H_UUID + at[i]] = 'x';
		reseal(&h);
		expect_invalid(&h, "zero", "a byte after the uuid's NUL");
	}
}
END_TEST

START_TEST(test_rule_zero_area)
{
	static const int at[] = { H_ZEROS, H_ZEROS + 1, 160, 208, 230, H_CHECKSUM - 1 };
	static const uint32_t kinds[] = { XDM_IPC_FD, XDM_IPC_BYTES, XDM_IPC_FDS };
	char what[64];

	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
		for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
			struct xdm_ipc_handle h = good_handle(kinds[k]);

			h.bytes[at[i]] = 0x80;
			reseal(&h);
			snprintf(what, sizeof(what), "byte %d of kind %u", at[i], kinds[k]);
			expect_invalid(&h, "zero", what);
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
	tcase_add_test(rules, test_rule_secret);
	tcase_add_test(rules, test_secret_equal);
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
