/* SPDX-License-Identifier: MIT */
/*
 * tags.c - interned tags and the calling thread's tag.
 *
 * A block keeps its tag as a pointer, so the text must outlive the block.
 * A C engine passes string literals; a Python program's strings come and
 * go.  Interning gives every distinct text one copy that lives as long as
 * the process, held by the runtime table (so it is reachable, not leaked),
 * and makes a tag cheap to set per thread: the allocation path only copies
 * a pointer.  The table is a hash set under a mutex that the allocation
 * path never takes; it is bounded (XDM_MAX_TAGS) because a program that
 * makes a tag per step would otherwise grow it without end.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

static _Thread_local const char *thread_tag;

/* FNV-1a: tags are short, and the table is off the hot path. */
static uint64_t tag_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

/* Insert into a table of cap slots (a power of two); no resize here. */
static void tag_slot_put(char **slots, size_t cap, char *s)
{
	size_t i = tag_hash(s) & (cap - 1);

	while (slots[i])
		i = (i + 1) & (cap - 1);
	slots[i] = s;
}

static enum xdm_status tag_table_grow(struct xdm_tag_table *t)
{
	size_t cap = t->cap ? t->cap * 2 : 64;
	char **slots = calloc(cap, sizeof(*slots));

	if (!slots)
		return xdm_error_set(XDM_E_OUT_OF_MEMORY, "xdm_tag_intern: no memory for the tag "
				     "table");
	for (size_t i = 0; i < t->cap; i++)
		if (t->slots[i])
			tag_slot_put(slots, cap, t->slots[i]);
	free(t->slots);
	t->slots = slots;
	t->cap = cap;
	return XDM_OK;
}

const char *xdm_tag_intern(const char *tag)
{
	struct xdm_tag_table *t = &xdm_table()->tags;
	const char *found = NULL;
	size_t len, i;
	char *copy;

	if (!tag) {
		xdm_error_set(XDM_E_INVALID, "xdm_tag_intern: tag is NULL");
		return NULL;
	}
	len = strnlen(tag, XDM_TAG_MAX + 1);
	if (len == 0 || len > XDM_TAG_MAX) {
		xdm_error_set(XDM_E_INVALID, "xdm_tag_intern: a tag is 1 to %d bytes, not %zu%s",
			      XDM_TAG_MAX, len, len > XDM_TAG_MAX ? " or more" : "");
		return NULL;
	}
	for (i = 0; i < len; i++) {
		/* One value per file in the tree, one field in a CSV row. */
		if (tag[i] == '\n' || tag[i] == ',' || (unsigned char)tag[i] < 0x20) {
			xdm_error_set(XDM_E_INVALID, "xdm_tag_intern: a tag may not hold a "
				      "newline, a comma or a control character");
			return NULL;
		}
	}
	pthread_mutex_lock(&t->lock);
	if (t->cap) {
		for (i = tag_hash(tag) & (t->cap - 1); t->slots[i]; i = (i + 1) & (t->cap - 1)) {
			if (strcmp(t->slots[i], tag) == 0) {
				found = t->slots[i];
				goto unlock;
			}
		}
	}
	if (t->n >= XDM_MAX_TAGS) {
		xdm_error_set(XDM_E_OUT_OF_MEMORY, "xdm_tag_intern: the process has %d distinct "
			      "tags, the most it keeps", XDM_MAX_TAGS);
		goto unlock;
	}
	/* Half full at most, so probes stay short. */
	if ((t->n + 1) * 2 > t->cap && tag_table_grow(t))
		goto unlock;
	copy = strdup(tag);
	if (!copy) {
		xdm_error_set(XDM_E_OUT_OF_MEMORY, "xdm_tag_intern: no memory for a tag");
		goto unlock;
	}
	tag_slot_put(t->slots, t->cap, copy);
	t->n++;
	found = copy;
unlock:
	pthread_mutex_unlock(&t->lock);
	return found;
}

enum xdm_status xdm_set_thread_tag(const char *tag)
{
	const char *interned = NULL;

	if (tag) {
		interned = xdm_tag_intern(tag);
		if (!interned)
			return xdm_last_error()->code;
	}
	thread_tag = interned;
	return XDM_OK;
}

const char *xdm_thread_tag(void)
{
	return thread_tag;
}
