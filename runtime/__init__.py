"""The model, the numerics and everything a user calls: graph, kernels, .tflite I/O, interpreter, zoo."""
