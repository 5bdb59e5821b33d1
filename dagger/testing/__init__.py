"""``dagger test``: a job's test cases run through the job's own path, with no broker (issue 40, being built)."""
