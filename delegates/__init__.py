"""Delegates: the Python delegate API and the GPU, Hexagon, Core ML and NNAPI delegates."""
