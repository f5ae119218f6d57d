"""perflsp: roofline-aware language server and CLI for CUDA and OpenMP-offload code."""

__version__ = "0.1.0"
