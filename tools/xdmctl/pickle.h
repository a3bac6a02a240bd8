/* SPDX-License-Identifier: MIT */
/*
 * pickle.h - a writer of Python's pickle format, protocol 2, for what
 * xdmctl snapshot writes: dicts, lists, strings, integers and booleans.
 *
 * Only opcodes that both Python's unpickler and the JavaScript one of
 * PyTorch's memory viewer read are written.  Lists are closed every 1000
 * items, as Python's own pickler does, so that a reader that spreads a
 * batch into one call is never handed a million.
 */
#ifndef XDM_TOOLS_PICKLE_H
#define XDM_TOOLS_PICKLE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct pickle_list {
	FILE *f;
	uint32_t batch;		/* items since the last mark */
};

void pickle_begin(FILE *f);
void pickle_end(FILE *f);

/* A dict: begin, then key and value pairs, then end. */
void pickle_dict_begin(FILE *f);
void pickle_dict_end(FILE *f);

/* A list: begin, pickle_list_item() before each item, end. */
void pickle_list_begin(struct pickle_list *l, FILE *f);
void pickle_list_item(struct pickle_list *l);
void pickle_list_end(struct pickle_list *l);

/* A string; what is not UTF-8 in s becomes U+FFFD, as Python reads UTF-8 only. */
void pickle_str(FILE *f, const char *s);
void pickle_uint(FILE *f, uint64_t v);
void pickle_bool(FILE *f, bool v);

/*
 * The memo: pickle_put() names the value just written, pickle_get()
 * writes it again by name, in two bytes (or five past 255).  What is
 * written many times (a key, a tag) is written once.
 */
void pickle_put(FILE *f, uint32_t id);
void pickle_get(FILE *f, uint32_t id);

#endif /* XDM_TOOLS_PICKLE_H */
