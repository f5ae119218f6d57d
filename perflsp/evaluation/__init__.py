"""Scoring the engine against labeled kernels (`perflsp eval`)."""
