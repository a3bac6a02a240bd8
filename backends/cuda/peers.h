/* SPDX-License-Identifier: MIT */
/*
 * peers.h - the peers= parameter of cuda_async and cuda_vmm: which other
 * devices of the process may use the layer's memory.
 *
 * Plain C without the driver: reading the value, and checking it against
 * what the driver said about the machine, are kept apart from asking the
 * driver (peers_grant.c), so that tests/unit/check_peers.c can run both on
 * a machine without a GPU, over machines it makes up.
 *
 * A set of ordinals is a 64-bit mask, bit n for device n: the runtime
 * serves at most XDM_MAX_DEVICES ordinals, and peers= names no more.
 */
#ifndef XDM_CUDA_PEERS_H
#define XDM_CUDA_PEERS_H

#include <stddef.h>
#include <stdint.h>

#include <xdm/module.h>

#define CUDA_PEERS_MAX XDM_MAX_DEVICES
_Static_assert(CUDA_PEERS_MAX <= 64, "a set of device ordinals is one uint64_t");

enum cuda_peers_kind {
	CUDA_PEERS_NONE,	/* no grant: the default */
	CUDA_PEERS_ALL,		/* every other device that can access ours */
	CUDA_PEERS_LIST,	/* exactly the devices listed */
};

/* What peers= asks for, read before the driver is asked anything. */
struct cuda_peers_request {
	enum cuda_peers_kind kind;
	uint64_t listed;	/* CUDA_PEERS_LIST: the ordinals given */
};

/* What the driver says about the process's devices, gathered by the caller. */
struct cuda_peers_machine {
	uint32_t self;		/* the ordinal of the layer's own device */
	uint32_t count;		/* devices the process sees (cuDeviceGetCount) */
	uint64_t can_access;	/* bit n: device n can access self's memory */
};

/* The answer: the devices to grant, and those `all` left out. */
struct cuda_peers {
	uint64_t granted;
	uint64_t skipped;	/* CUDA_PEERS_ALL: devices that cannot access self */
};

/*
 * Read text, the value of peers= ("none", "all", or decimal ordinals
 * separated by commas, like "1,2"; NULL reads as "none").  XDM_E_CONFIG
 * with a sentence that names layer and the value for anything else: an
 * empty value or item, a word, an ordinal of XDM_MAX_DEVICES or more, an
 * ordinal named twice.
 */
enum xdm_status cuda_peers_parse(const char *layer, const char *text,
				 struct cuda_peers_request *out);

/*
 * The devices to grant.  `all`: every device of m other than self whose
 * can_access bit is set, the others in skipped.  A list: each ordinal must
 * exist, must not be self and must be able to access self; the first that
 * fails (lowest first) is XDM_E_CONFIG, with a sentence naming it and why.
 * Devices past CUDA_PEERS_MAX are never granted.
 */
enum xdm_status cuda_peers_resolve(const char *layer, const struct cuda_peers_request *req,
				   const struct cuda_peers_machine *m, struct cuda_peers *out);

/*
 * A write of the `peers` attribute: buf[0..len), a trailing newline allowed,
 * read as peers= is ('all' or ordinals), except that 'none' is refused: a
 * write only ever adds devices, so 'none' would ask for a revocation that
 * never happens.  XDM_E_CONFIG with a sentence, as cuda_peers_parse.
 */
enum xdm_status cuda_peers_parse_write(const char *layer, const char *buf, size_t len,
				       struct cuda_peers_request *out);

/*
 * A grant at run time, over what `have` granted already: *out is the union.
 * As cuda_peers_resolve, except that the layer's own device, when listed,
 * is accepted and adds nothing (it always has access), and that skipped
 * keeps only devices still not granted.  On XDM_E_CONFIG (a listed device
 * the machine lacks, or one that cannot access self) *out is *have: one bad
 * ordinal changes nothing, so the caller may grant only on XDM_OK.
 */
enum xdm_status cuda_peers_extend(const char *layer, const struct cuda_peers_request *req,
				  const struct cuda_peers_machine *m, const struct cuda_peers *have,
				  struct cuda_peers *out);

/*
 * The ordinals of set, ascending, separated by one space, and a newline
 * (just the newline for none): an attribute's value.  Its length, or
 * -EOVERFLOW when buf is too short.
 */
int cuda_peers_show(uint64_t set, char *buf, size_t len);

#endif /* XDM_CUDA_PEERS_H */
