"""Struct fields the host code sets one by one (`params p; p.n = 1 << 20; p.iters = 8;`):
each is bound by its path (`p.n`), which `p.n` in a later fold reads. Setting or declaring
`p` again, or taking its address, forgets them."""

from __future__ import annotations

from collections.abc import Callable

from perflsp.kernels.consteval import ConstEnv


def bind_field(env: ConstEnv, path: str, text: str, unknown: bool,
               freeze: Callable[[ConstEnv, str], None]) -> None:
    """`path = text;` (in a loop or branch whose condition does not fold, or a compound
    assignment: `unknown`)."""
    freeze(env, path)
    env._memo.pop(path, None)
    if unknown:
        env.unknown[path] = "is set inside a loop or branch, or updated in place"
        env.constants.pop(path, None)
        return
    env.constants[path] = text
    env.unknown.pop(path, None)


def forget_fields(env: ConstEnv, name: str, dry: bool = False) -> bool:
    """`name` changes as a whole: the fields bound under it no longer hold. Returns whether
    there were any (`dry`: only says so)."""
    prefix = name + "."
    paths = [p for p in (*env.constants, *env.unknown) if p.startswith(prefix)]
    if dry:
        return bool(paths)
    for path in paths:
        env.constants.pop(path, None)
        env.unknown[path] = f"belongs to `{name}`, which changes"
        env._memo.pop(path, None)
    return bool(paths)
