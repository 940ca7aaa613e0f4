"""The model stage: .tflite files read into a Graph and written back, and the one loader (file or zoo, quantization)."""
