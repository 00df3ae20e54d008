"""Turning texts into vectors: the embedder protocol, ONNX and torch backends, the cache, Ray, models."""
