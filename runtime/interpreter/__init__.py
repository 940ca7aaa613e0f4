"""The interpreter stage: LiteRT's Python API, the plan and its step loop, subgraph state, delegation, and the executor on the simulated phone.

`from runtime.interpreter import Interpreter` is the public path; the names load on first use so that
importing one module of this stage (delegation, say) does not load the whole interpreter."""

__all__ = ["Interpreter", "SignatureRunner", "OpResolverType"]


def __getattr__(name):
    if name in __all__:
        from runtime.interpreter import api
        return getattr(api, name)
    raise AttributeError(f"module 'runtime.interpreter' has no attribute {name!r}")
