# adaptors/budget: see issue 4
