/* SPDX-License-Identifier: MIT */
/*
 * query_id.c - the calling thread's query id.  Like the error detail it is
 * per thread: an engine runs one query per worker at a time and tags every
 * allocation that worker makes, with no call site passing the id along.
 */
#include "config.h"

#include "core/internal.h"

static _Thread_local uint64_t query_id;

void xdm_set_query_id(uint64_t id)
{
	query_id = id;
}

uint64_t xdm_query_id(void)
{
	return query_id;
}
