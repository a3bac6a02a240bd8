/* SPDX-License-Identifier: MIT */
/*
 * peers.c - reading peers= and checking it against the machine; see peers.h.
 *
 * The list separator is the comma: the stack tokenizer (core/config.c)
 * ends an unquoted value only at a blank or a '|', so "peers=1,2" reaches
 * the layer whole, in a config file and in a stack string alike.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "peers.h"

#define CUDA_PEERS_FORMS "'none', 'all' or device ordinals separated by commas (like 1,2)"

static enum xdm_status cuda_peers_bad(const char *layer, const char *text, const char *why)
{
	return xdm_error_set(XDM_E_CONFIG, "%s: peers='%s' must be " CUDA_PEERS_FORMS "; %s",
			     layer, text, why);
}

/* One item of the list, text[0..len): decimal digits below CUDA_PEERS_MAX. */
static enum xdm_status cuda_peers_item(const char *layer, const char *text, const char *item,
				       size_t len, uint32_t *ordinal)
{
	char why[160];
	uint32_t n = 0;

	if (!len)
		return cuda_peers_bad(layer, text, "an ordinal is missing before or after a comma");
	for (size_t i = 0; i < len; i++) {
		if (item[i] < '0' || item[i] > '9') {
			snprintf(why, sizeof(why), "'%.*s' is not a device ordinal", (int)len, item);
			return cuda_peers_bad(layer, text, why);
		}
		/* Stop growing once past the bound: no overflow, same answer. */
		if (n < CUDA_PEERS_MAX)
			n = n * 10 + (uint32_t)(item[i] - '0');
	}
	if (n >= CUDA_PEERS_MAX) {
		snprintf(why, sizeof(why), "device %.*s is past the largest ordinal xdm serves, %d",
			 (int)len, item, CUDA_PEERS_MAX - 1);
		return cuda_peers_bad(layer, text, why);
	}
	*ordinal = n;
	return XDM_OK;
}

enum xdm_status cuda_peers_parse(const char *layer, const char *text,
				 struct cuda_peers_request *out)
{
	const char *item;
	char why[96];

	memset(out, 0, sizeof(*out));
	if (!text || !strcmp(text, "none")) {
		out->kind = CUDA_PEERS_NONE;
		return XDM_OK;
	}
	if (!strcmp(text, "all")) {
		out->kind = CUDA_PEERS_ALL;
		return XDM_OK;
	}
	/* A stack never gets here (its tokenizer refuses an empty value,
	 * quoted or not); a caller of this function might. */
	if (!*text)
		return cuda_peers_bad(layer, text, "it is empty");
	for (item = text;; item++) {
		size_t len = strcspn(item, ",");
		uint32_t n = 0;
		enum xdm_status st = cuda_peers_item(layer, text, item, len, &n);

		if (st)
			return st;
		if (out->listed & (UINT64_C(1) << n)) {
			snprintf(why, sizeof(why), "device %u is named twice", n);
			return cuda_peers_bad(layer, text, why);
		}
		out->listed |= UINT64_C(1) << n;
		item += len;
		if (!*item)
			break;
	}
	out->kind = CUDA_PEERS_LIST;
	return XDM_OK;
}

/* Why device n may not be granted by name; NULL when it may. */
static enum xdm_status cuda_peers_refuse(const char *layer, const struct cuda_peers_machine *m,
					 uint32_t n)
{
	if (n >= m->count)
		return xdm_error_set(XDM_E_CONFIG, "%s: peers names device %u, which this process "
				     "does not have: it sees %u CUDA device%s, numbered from 0 "
				     "(after CUDA_VISIBLE_DEVICES)", layer, n, m->count,
				     m->count == 1 ? "" : "s");
	if (n == m->self)
		return xdm_error_set(XDM_E_CONFIG, "%s: peers names device %u, which is the "
				     "layer's own device and always has access", layer, n);
	if (!(m->can_access & (UINT64_C(1) << n)))
		return xdm_error_set(XDM_E_CONFIG, "%s: peers names device %u, which cannot "
				     "access the memory of device %u (cuDeviceCanAccessPeer says "
				     "no)", layer, n, m->self);
	return XDM_OK;
}

enum xdm_status cuda_peers_resolve(const char *layer, const struct cuda_peers_request *req,
				   const struct cuda_peers_machine *m, struct cuda_peers *out)
{
	uint32_t last = m->count < CUDA_PEERS_MAX ? m->count : CUDA_PEERS_MAX;
	enum xdm_status st;

	memset(out, 0, sizeof(*out));
	switch (req->kind) {
	case CUDA_PEERS_NONE:
		return XDM_OK;
	case CUDA_PEERS_ALL:
		for (uint32_t n = 0; n < last; n++) {
			uint64_t bit = UINT64_C(1) << n;

			if (n == m->self)
				continue;
			if (m->can_access & bit)
				out->granted |= bit;
			else
				out->skipped |= bit;
		}
		return XDM_OK;
	case CUDA_PEERS_LIST:
		for (uint32_t n = 0; n < CUDA_PEERS_MAX; n++) {
			if (!(req->listed & (UINT64_C(1) << n)))
				continue;
			st = cuda_peers_refuse(layer, m, n);
			if (st) {
				out->granted = 0;
				return st;
			}
			out->granted |= UINT64_C(1) << n;
		}
		return XDM_OK;
	}
	return xdm_error_set(XDM_E_INVALID, "%s: peers: unknown request %d", layer,
			     (int)req->kind);
}

enum xdm_status cuda_peers_parse_write(const char *layer, const char *buf, size_t len,
				       struct cuda_peers_request *out)
{
	/* The longest list, every ordinal once, is far shorter than this. */
	char text[4 * CUDA_PEERS_MAX + 8];

	memset(out, 0, sizeof(*out));
	if (len && buf[len - 1] == '\n')
		len--;
	if (len >= sizeof(text))
		return xdm_error_set(XDM_E_CONFIG, "%s: peers: a write of %zu bytes is longer "
				     "than any list of device ordinals", layer, len);
	if (memchr(buf, '\0', len))
		return xdm_error_set(XDM_E_CONFIG, "%s: peers: a write holds a NUL byte", layer);
	memcpy(text, buf, len);
	text[len] = '\0';
	/* parse reads NULL as none: an empty write must not pass as one. */
	if (!strcmp(text, "none"))
		return xdm_error_set(XDM_E_CONFIG, "%s: peers: a write grants the devices it "
				     "names and never takes a grant back, so 'none' means "
				     "nothing; write 'all' or ordinals like 1,2", layer);
	return cuda_peers_parse(layer, text, out);
}

enum xdm_status cuda_peers_extend(const char *layer, const struct cuda_peers_request *req,
				  const struct cuda_peers_machine *m, const struct cuda_peers *have,
				  struct cuda_peers *out)
{
	struct cuda_peers_request r = *req;
	struct cuda_peers more;
	enum xdm_status st;

	*out = *have;
	/*
	 * A caller that grants "device a may use device b's memory" for
	 * every pair (PyTorch's enablePeerAccess) names b itself too: its
	 * own device always has access, so that is no error at run time.
	 */
	if (r.kind == CUDA_PEERS_LIST && m->self < CUDA_PEERS_MAX)
		r.listed &= ~(UINT64_C(1) << m->self);
	st = cuda_peers_resolve(layer, &r, m, &more);
	if (st)
		return st;
	out->granted = have->granted | more.granted;
	out->skipped = (have->skipped | more.skipped) & ~out->granted;
	return XDM_OK;
}

int cuda_peers_show(uint64_t set, char *buf, size_t len)
{
	size_t used = 0;
	int n;

	for (uint32_t i = 0; i < CUDA_PEERS_MAX; i++) {
		if (!(set & (UINT64_C(1) << i)))
			continue;
		n = snprintf(buf + used, len - used, "%s%u", used ? " " : "", i);
		if (n < 0 || (size_t)n >= len - used)
			return -EOVERFLOW;
		used += (size_t)n;
	}
	if (used + 2 > len)
		return -EOVERFLOW;
	buf[used++] = '\n';
	buf[used] = '\0';
	return (int)used;
}
