"""Option loops over the program's arguments: `for (int i = 1; i < argc; i++) { if
(strcmp(argv[i], "-n") == 0) n = atoi(argv[++i]); ... }` (or `while (i < argc) { ...; i += 2; }`)
run once per argument when the arguments are known, each pass with the loop variable's value, so that the option a pass
compares `argv[i]` with picks the branch that runs and what it sets keeps its value. Loops that
only step plain variables (`while (m % 64 != 0) m++;`) are run the same way, pass by pass
(`read_counting_loop`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from tree_sitter import Node

from perflsp.kernels.consteval import ConstEnv, ReadsApart, note_assumed_read, try_evaluate
from perflsp.kernels.context import ExtractionContext

_Chain = tuple[tuple[Node, str], ...]
_MAX_PASSES = 256  # (an option loop runs once per argument at most: a bound on a loop that does not advance)
_LOOPS = ("for_statement", "while_statement", "do_statement", "for_range_loop")


class Replay(Protocol):
    ctx: ExtractionContext
    events: list[tuple[int, int, _Chain, Callable[[Any, bool], None]]]
    env: ConstEnv
    path: dict[int, str]
    status: dict[int, object]
    assumed_controls: set[int]
    next: int

    def _mode(self, chain: _Chain) -> str: ...


def _part(chain: _Chain, control: Node) -> str | None:
    for node, part in chain:
        if node.start_byte == control.start_byte:
            return part
    return None


def _jumps(control: Node, body: Node) -> list[tuple[Node, bool]] | None:
    """The `break`/`continue` statements that leave a pass of `control` (True for `break`), or
    None where one cannot be followed (a `goto`, a jump outside any `if`)."""
    found: list[tuple[Node, bool]] = []
    stack = [body]
    while stack:
        node = stack.pop()
        if node.type == "goto_statement":
            return None
        if node.type in ("break_statement", "continue_statement"):
            parent = node.parent
            owned = True
            guarded = False
            while parent is not None and parent.start_byte != control.start_byte:
                if parent.type in _LOOPS or (parent.type == "switch_statement" and node.type == "break_statement"):
                    owned = False
                    break
                guarded = guarded or parent.type == "if_statement"
                parent = parent.parent
            if owned:
                if not guarded:
                    return None
                found.append((node, node.type == "break_statement"))
            continue
        if node.type in ("function_definition", "lambda_expression"):
            continue
        stack.extend(node.named_children)
    return found


def _taken(replay: Replay, jump: Node, control: Node) -> bool | None:
    """Whether this pass reaches `jump`: the `if`s around it chose its side (None: not known)."""
    known = True
    parent = jump.parent
    while parent is not None and parent.start_byte != control.start_byte:
        if parent.type == "if_statement":
            status = replay.status.get(parent.start_byte)
            consequence = parent.child_by_field_name("consequence")
            inside = consequence is not None and consequence.start_byte <= jump.start_byte < consequence.end_byte
            if isinstance(status, bool) and status != inside:
                return False  # (a branch around it is not taken)
            known = known and isinstance(status, bool)
        parent = parent.parent
    return True if known else None


def read_argument_loop(replay: Replay, control: Node, passing: object, done: object) -> bool:
    """Run a `for` or `while` loop whose condition reads `argc` and whose body reads `argv` once per pass
    over the known program arguments (`passing` its status meanwhile, `done` after). Returns
    whether the loop was such a loop and was run so; where a pass cannot be followed (a
    condition that does not fold, a jump whose branch is not known), nothing is changed."""
    ctx = replay.ctx
    condition = control.child_by_field_name("condition")
    body = control.child_by_field_name("body")
    if control.type not in ("for_statement", "while_statement") or condition is None or body is None \
            or control.start_byte in replay.path or replay.env.program_arguments() is None:
        return False
    if "argc" not in ctx.text(condition) or "argv" not in ctx.text(body):
        return False
    jumps = _jumps(control, body)
    if jumps is None:
        return False
    loop = _ArgumentLoop(replay, control, body, jumps)
    replay.status[control.start_byte] = passing
    if not loop.run(ctx.text(condition)):
        return loop.restore()
    if replay.env.arguments_assumed():
        note_assumed_read()
        replay.assumed_controls.add(control.start_byte)
    replay.status[control.start_byte] = done
    return True


_MAX_COUNTING_PASSES = 4096  # (a loop that rounds a size up or searches a small factor: its passes are few)
_COUNTING_NODES = frozenset({"compound_statement", "expression_statement", "assignment_expression",
                             "update_expression", "identifier", "number_literal", "binary_expression",
                             "parenthesized_expression", "unary_expression", "field_expression", "field_identifier",
                             "conditional_expression", "comment", "sizeof_expression", "type_descriptor",
                             "primitive_type", "cast_expression"})


def read_counting_loop(replay: Replay, control: Node, passing: object, done: object) -> bool:
    """Run a loop of the host code whose body only steps plain variables (`while (n % 64 != 0)
    n++;`, `while (s * r < n) r++;`) pass by pass while its condition folds, at most a few
    thousand passes: what it leaves is then known instead of set an unknown number of times.
    Returns whether it was such a loop and was run so (`passing` its status meanwhile, `done`
    after); nothing changes otherwise."""
    ctx = replay.ctx
    condition = control.child_by_field_name("condition")
    body = control.child_by_field_name("body")
    if control.type not in ("for_statement", "while_statement") or condition is None or body is None \
            or control.start_byte in replay.path or not _steps_variables_only(body):
        return False
    loop = _ArgumentLoop(replay, control, body, [])
    replay.status[control.start_byte] = passing
    if not loop.run(ctx.text(condition), limit=_MAX_COUNTING_PASSES):
        return loop.restore()
    replay.status[control.start_byte] = done
    return True


def _steps_variables_only(body: Node) -> bool:
    """Whether a loop body only assigns or steps plain variables with calls-free arithmetic."""
    stack = [body]
    while stack:
        node = stack.pop()
        if node.type not in _COUNTING_NODES:
            return False
        if node.type in ("assignment_expression", "update_expression"):
            target = node.child_by_field_name("left" if node.type == "assignment_expression" else "argument")
            if target is None or target.type != "identifier":
                return False
        stack.extend(node.named_children)
    return True


class _ArgumentLoop:
    def __init__(self, replay: Replay, control: Node, body: Node, jumps: list[tuple[Node, bool]]):
        self.replay = replay
        self.control = control
        self.body = body
        self.jumps = jumps
        self.parts: dict[str, list[int]] = {"initializer": [], "condition": [], "update": [], "body": []}
        for index in range(replay.next + 1, len(replay.events)):
            start, _, chain, _ = replay.events[index]
            if start >= control.end_byte:
                break
            part = _part(chain, control)
            if part in self.parts:
                self.parts[part].append(index)
        env = replay.env
        self.saved = (dict(env.constants), dict(env.unknown), set(env.assumed), dict(replay.status))
        self.left: list[bool] = []  # (the jump that ended this pass: True for `break`)

    def run(self, condition: str, limit: int = _MAX_PASSES) -> bool:
        """All passes; False where one cannot be followed."""
        self._events(self.parts["initializer"], jumps=False)
        for _ in range(limit):
            with ReadsApart():
                value, _ = try_evaluate(condition, self.replay.env)
            if not isinstance(value, (int, float)):
                return False
            if not value:
                return True
            self._events(self.parts["condition"], jumps=False)
            for start in [key for key in self.replay.status if self.body.start_byte <= key < self.body.end_byte]:
                del self.replay.status[start]  # (the branches of the body fold anew on each pass)
            self.left = []
            try:
                if self._events(self.parts["body"], jumps=True):
                    self._jumped(self.body.end_byte)
            except _Unfollowed:
                return False
            if self.left and self.left[0]:
                return True
            self._events(self.parts["update"], jumps=False)
        return False

    def _events(self, indices: list[int], jumps: bool) -> bool:
        for index in indices:
            start, _, chain, apply = self.replay.events[index]
            if jumps and self._jumped(start):
                return False
            mode = self.replay._mode(chain)
            if mode != "skip":
                apply(self.replay, mode == "control")
        return True

    def _jumped(self, start: int) -> bool:
        """Whether a `break`/`continue` before `start` ended this pass."""
        for jump, is_break in self.jumps:
            if jump.end_byte <= start:
                taken = _taken(self.replay, jump, self.control)
                if taken is None:
                    raise _Unfollowed
                if taken:
                    self.left.append(is_break)
                    return True
        return False

    def restore(self) -> bool:
        env = self.replay.env
        env.constants.clear()
        env.constants.update(self.saved[0])
        env.unknown.clear()
        env.unknown.update(self.saved[1])
        env.assumed.clear()
        env.assumed.update(self.saved[2])
        env._memo.clear()
        self.replay.status.clear()
        self.replay.status.update(self.saved[3])
        return False


class _Unfollowed(Exception):
    """A pass reaches a `break`/`continue` whose branch is not known."""
