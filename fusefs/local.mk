# fusefs: filled in by its issue
