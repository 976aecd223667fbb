"""A checkpoint to the served graphs: ONNX export, int8 quantization (row scaling, smoothing) and the packed fp32."""
