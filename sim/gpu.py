"""A mobile GPU: tensors in slices of 4 channels (PHWC4), float32/float16 rates, OpenCL or OpenGL."""

from __future__ import annotations

import enum

from sim.unit import Scales, Unit

__all__ = ["GpuUnit", "Backend"]


class Backend(enum.Enum):
    OPENCL = "cl"
    OPENGL = "gl"


class GpuUnit(Unit):
    """The padding law lives in the work description (channel_align = 4 from the profile): a
    [1,H,W,5] tensor is stored, moved and computed as [1,H,W,8]. Entering or leaving the GPU, data
    is converted between BHWC and PHWC4 at the profile's conversion rate (charged at the boundary)."""

    def backend_scales(self, backend: Backend | str = Backend.OPENCL) -> Scales:
        """OpenGL compute shaders run slower and launch dearer than OpenCL kernels; the factors
        are the profile's (TFLite documents OpenCL as up to ~2x faster than OpenGL)."""
        if Backend(backend) is Backend.OPENCL:
            return Scales()
        extras = self.spec.extras
        return Scales(rate=extras.get("opengl_rate_scale", 0.5),
                      dispatch=extras.get("opengl_dispatch_scale", 1.0))
