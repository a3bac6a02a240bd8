/* SPDX-License-Identifier: MIT */
/*
 * fuzz.h - what every libFuzzer target of tests/fuzz shares: the entry
 * point's prototype, the input as a C string, and a failed property as a
 * crash.
 *
 * A property that does not hold must stop the run the way a sanitizer
 * report does: libFuzzer saves the input that did it (crash-<sha1>) and
 * run.sh fails.  abort() does that; a message says which property broke.
 */
#ifndef XDM_TESTS_FUZZ_H
#define XDM_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_ASSERT(cond, ...)                                                  \
	do {                                                                    \
		if (!(cond)) {                                                  \
			fprintf(stderr, "%s:%d: property failed: %s: ", __FILE__, \
				__LINE__, #cond);                               \
			fprintf(stderr, __VA_ARGS__);                           \
			fputc('\n', stderr);                                    \
			abort();                                                \
		}                                                               \
	} while (0)

/*
 * The input as a NUL-terminated string, cut at its first NUL byte: the
 * parsers take C strings, so bytes after a NUL can never reach them.
 * NULL only when malloc fails, which the caller treats as nothing to do.
 */
static inline char *fuzz_string(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	if (!s)
		return NULL;
	memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

#endif /* XDM_TESTS_FUZZ_H */
