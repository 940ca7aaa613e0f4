"""Phone profiles shipped as YAML data files (read by sim.profile)."""
