# adaptors: filled in by its issue
