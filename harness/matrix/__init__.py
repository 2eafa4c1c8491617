"""What the matrix is: matrix.toml, the wheels published per Python, interpreters, backends;
and the plumbing every layer shares (repository paths, logged subprocesses)."""
