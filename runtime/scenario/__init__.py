"""The scenario stage: the YAML file format, its checks with file:line, and its expansion over the matrix."""
