"""The ground floor: the graph IR, op types, options, errors and partition records; it imports nothing else of the project."""
