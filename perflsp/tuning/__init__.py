"""Tuned launch parameters: a search loop with measured feedback over Kernel Tuner.

`problem` builds the tuning space from the code (launch block dimensions, knobs named with a
`perflsp:tune` comment), `search` runs Kernel Tuner over it with a strategy (`strategies`: its own,
or perflsp's static prior and LLM proposer), `cache` reads/writes Kernel Tuner cache files and the
per-workspace store, `edits` turns a tuned configuration into one validated edit, `portability`
compares the best configurations across GPUs. Kernel Tuner is an optional dependency
(`pip install 'perflsp[tune]'`); without it everything here says so instead of failing.
"""
