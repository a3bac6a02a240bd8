# adaptors/logging: see issue 4
