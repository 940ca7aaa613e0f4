"""The delegate conformance kit: claimed ops run against the CPU reference, lifecycle and contract cases, and its pytest plugin.

`runtime.conformance.run_conformance` is the public path; the kit loads on first use."""

__all__ = ["Tolerance", "TOLERANCES", "PlannedCase", "ConformanceRun", "run_conformance",
           "resolve_factory", "compare", "ConformanceReport"]


def __getattr__(name):
    if name == "ConformanceReport":
        from runtime.conformance import report
        return report.ConformanceReport
    if name in __all__:
        from runtime.conformance import kit
        return getattr(kit, name)
    raise AttributeError(f"module 'runtime.conformance' has no attribute {name!r}")
