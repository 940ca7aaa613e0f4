"""The measurement stage: latency, boundary, energy and memory (TFLite's arena planner) from a simulated run, its trace and its record."""
