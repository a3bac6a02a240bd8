# adaptors/guard: see issue 4
