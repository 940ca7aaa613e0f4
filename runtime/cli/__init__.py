"""The `dtb` command line: one module per command family, sharing the flag and output helpers of common.py."""
