"""The simulated phone hardware: SoC, compute units, memory and power (built on SimPy)."""
