"""The calibration stage: measured latencies in (CSV, benchmark_model logs), a profile's physical parameters fitted to them, cross-validation."""
