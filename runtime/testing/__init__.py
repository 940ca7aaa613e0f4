"""Testing aids for users of the testbed: hypothesis strategies for tensors, ops and graphs."""
