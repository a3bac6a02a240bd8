# backends/host: filled in by its issue
