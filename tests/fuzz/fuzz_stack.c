/* SPDX-License-Identifier: MIT */
/*
 * fuzz_stack.c - the stack spec parser, xdm_config_parse_stack(), which reads
 * xdm-bench --stack, xdm_runtime_create()'s stack and the Python package's.
 *
 * A refused spec leaves the result untouched and names a line and column of
 * the spec; an accepted one is well formed and reads back the same when
 * written out again (conf_text.h).  Leaks are LeakSanitizer's to find.
 */
#include "config.h"

#include "tests/fuzz/conf_text.h"

static const char source[] = "<fuzz>";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct xdm_conf_stack st = { .layers = (void *)&st, .nlayers = 7 };
	struct xdm_conf_stack again = { NULL, 0 };
	struct text written = { NULL, 0, 0 };
	enum xdm_status rc;
	char *spec = fuzz_string(data, size);

	if (!spec)
		return 0;
	rc = xdm_config_parse_stack(source, spec, &st);
	if (rc != XDM_OK) {
		check_refusal(rc, source, spec);
		FUZZ_ASSERT(st.layers == (void *)&st && st.nlayers == 7,
			    "a refused spec wrote its result");
		goto out;
	}
	check_stack_shape(&st);
	text_stack(&written, &st);
	rc = xdm_config_parse_stack(source, written.p, &again);
	FUZZ_ASSERT(rc == XDM_OK, "'%s' written back as '%s' is refused: %s", spec, written.p,
		    xdm_last_error()->message);
	FUZZ_ASSERT(stack_eq(&st, &again), "'%s' written back as '%s' reads differently", spec,
		    written.p);
	xdm_conf_stack_free(&again);
	xdm_conf_stack_free(&st);
out:
	free(written.p);
	free(spec);
	return 0;
}
