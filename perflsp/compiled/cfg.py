"""A SASS function's control-flow graph: basic blocks, their counts per source position, natural
loops (back edges to a dominating header), their nesting, the branches that close them and the
registers they step by a constant (how far one trip of an unrolled loop advances)."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection

from perflsp.compiled.execution_mode import other_mode_arms
from perflsp.compiled.isa import classify
from perflsp.compiled.model import CLASSES, INDEX, ZERO, Block, CompiledFunction, LineCounts, Loop, Step, Vector, add
from perflsp.compiled.sass import Instruction, Location, SassFunction, branch_target
from perflsp.compiled.slow_paths import huge_argument_arms
from perflsp.compiled.special import fix_up_arms, special_operand_instructions

_ENDS_BLOCK = frozenset({"BRA", "BRX", "JMP", "JMX", "EXIT", "RET", "BREAK", "KILL"})
_STEP = re.compile(r"^(U?R\d+),\s*(?:U?P\d+,\s*)?(U?R\d+),\s*(-?0x[0-9a-f]+|-?\d+)\b")
_STEP_OPCODES = frozenset({"IADD3", "IADD", "IADD32I", "VIADD", "UIADD3"})
_ISSUED_ONLY: Vector = tuple(1.0 if name == "instructions" else 0.0 for name in CLASSES)


def build_function(fn: SassFunction) -> CompiledFunction:
    instructions = fn.instructions
    chains: list[tuple[Location, ...]] = []
    chain_index: dict[tuple[Location, ...], int] = {}

    def chain_id(chain: tuple[Location, ...]) -> int:
        if chain not in chain_index:
            chain_index[chain] = len(chains)
            chains.append(chain)
        return chain_index[chain]

    if not instructions:
        return CompiledFunction(fn.name, fn.is_entry, fn.registers, chains, [], [], frame_bytes=frame_bytes(instructions))
    by_label = {label: i for i, ins in enumerate(instructions) for label in ins.labels}
    looping = set(looping_subroutines(fn))
    subroutines = _subroutines(instructions, by_label, looping)
    starts, successors = _blocks(instructions, subroutines.keys() | looping)
    # the arms only a library function's huge arguments take are cut off: their code goes with
    # the blocks no thread reaches then
    slow_arms = huge_argument_arms(instructions, starts, successors)
    for b, arm in slow_arms.items():
        successors[b].remove(arm)
    # (an OpenMP kernel compiled for two execution modes runs in the one its entry stores)
    for b, arm in other_mode_arms(instructions, starts, successors).items():
        if arm in successors[b]:
            successors[b].remove(arm)
    reachable = _reachable(successors)
    fix_ups = fix_up_arms(instructions, starts, successors)
    special = special_operand_instructions(instructions)
    # renumber the reachable blocks (dead code such as the trailing `BRA` to itself goes)
    order = [b for b in range(len(starts)) if b in reachable]
    renumber = {old: new for new, old in enumerate(order)}
    blocks: list[Block] = []
    bounds = [*starts, len(instructions)]
    for old in order:
        lines: dict[int, tuple[Vector, Vector]] = {}
        calls: list[str] = []
        call_chains: list[int] = []
        indirect = 0
        for at in range(bounds[old], bounds[old + 1]):
            ins = instructions[at]
            # issued, but predicated off for the operands kernels compute on (`special`)
            vector = _ISSUED_ONLY if at in special else _vector(ins)
            if ins.base == "CALL":
                target = branch_target(ins)
                if target in looping:
                    calls.append(target)  # a function of its own (`looping_subroutines`)
                    call_chains.append(chain_id(ins.chain))
                elif target in subroutines:
                    # a subroutine of the function (a 64-bit integer division): its code runs
                    # where an unconditional call is; a guarded call, one of a `slowpath` or one
                    # on the arm a statement's own test branches around (`fix_up_arms`)
                    # handles special operands and nearly never runs
                    if not ins.predicated and old not in fix_ups:
                        vector = add(vector, subroutines[target])
                elif target and target in by_label:
                    pass  # a branch within the function (see `_local_call`)
                elif target and ("slowpath" in target
                                 or (target.startswith("__cuda_") and (ins.predicated or old in fix_ups))):
                    # the same helpers in relocatable code (clang's OpenMP offload), where ptxas
                    # makes them functions of their own (`CALL.ABS.NOINC `(__cuda_sm20_div_rn_f64_full)`):
                    # a slow path, or a call on a fix-up arm, as above
                    pass
                elif target and not ins.operands.startswith(("R", "UR")):
                    calls.append(target)
                    call_chains.append(chain_id(ins.chain))
                else:
                    indirect += 1
            cid = chain_id(ins.chain)
            counts, predicated = lines.get(cid, (ZERO, ZERO))
            counts = add(counts, vector)
            if ins.predicated:
                predicated = add(predicated, vector)
            lines[cid] = (counts, predicated)
        last = instructions[bounds[old + 1] - 1]
        exit_chain = chain_id(last.chain) if last.base == "EXIT" and last.predicated else None
        blocks.append(Block(instructions[bounds[old]].offset, [LineCounts(c, v, p) for c, (v, p) in lines.items()],
                            [renumber[s] for s in successors[old] if s in renumber], None, calls, indirect,
                            exit_chain, call_chains=call_chains))
    dom = dominators(blocks)
    loops = _loops(blocks, instructions, bounds, order, chain_id, dom)
    _mark_early_exits(blocks, dom)
    return CompiledFunction(fn.name, fn.is_entry, fn.registers, chains, blocks, loops, len(slow_arms),
                            frame_bytes(instructions))


# the prologue that makes room for a thread's stack frame: `IADD3 R1, R1, -0x100, RZ`
# (sm_80/sm_90), `VIADD R1, R1, 0xffffff00` (two's complement, newer ptxas)
_FRAME = re.compile(r"^R1,\s*R1,\s*(-?0x[0-9a-fA-F]+)")


def frame_bytes(instructions: list[Instruction]) -> int:
    """Bytes of stack the function takes per thread (R1 is the stack pointer): 0 without a frame."""
    for ins in instructions[:_PROLOGUE]:
        if ins.base in ("IADD3", "VIADD", "IADD") and (m := _FRAME.match(ins.operands)):
            step = int(m.group(1), 16)
            if step >= 1 << 31:
                step -= 1 << 32
            return max(0, -step)
    return 0


_PROLOGUE = 16  # instructions searched for it


def _vector(ins: Instruction) -> Vector:
    cost = classify(ins)
    values = [0.0] * len(CLASSES)
    for name in ("fp32", "fp64", "fp16", "integer", "special", "conversion", "load_bytes", "store_bytes", "loads",
                 "stores", "atomics", "shared", "local", "local_bytes", "uniform", "instructions"):
        values[INDEX[name]] = getattr(cost, name)
    if cost.tensor and cost.tensor_kind:
        values[INDEX["tensor_" + cost.tensor_kind]] = cost.tensor
    return tuple(values)


def looping_subroutines(fn: SassFunction) -> dict[str, SassFunction]:
    """The subroutines of `fn` that loop (a device function ptxas did not inline,
    `$_Z6kernelPf$_Z7fitnessPf`, whose loop runs on every call): each read as a function of its
    own, from its label to its return, so that its loops count their trips. Those that do not
    loop are summed where they are called (`_subroutines`)."""
    instructions = fn.instructions
    by_label = {label: i for i, ins in enumerate(instructions) for label in ins.labels}
    found: dict[str, SassFunction] = {}
    for ins in instructions:
        target = branch_target(ins) if ins.base == "CALL" else None
        if target is None or target not in by_label or target in found or target.startswith(".L") \
                or "slowpath" in target:
            continue
        start = by_label[target]
        # (a device function may end the kernel on a path of its own, `EXIT` where a `switch`
        # has no case: its end is its return)
        end = next((i for i in range(start, len(instructions))
                    if instructions[i].base == "RET" and not instructions[i].predicated), None)
        if end is None:
            continue
        inside = {label for body in instructions[start:end + 1] for label in body.labels}
        if any(body.base == "BRA" and (t := branch_target(body)) in inside and by_label[t] <= at
               for at, body in enumerate(instructions[start:end + 1], start)):
            found[target] = SassFunction(target, False, fn.registers, instructions[start:end + 1])
    return found


def _subroutines(instructions: list[Instruction], by_label: dict[str, int], looping: set[str]) -> dict[str, Vector]:
    """Labels that calls within the function reach and that return (`RET`): what one pass
    through each costs (its straight-line instructions up to the return). ptxas names its
    subroutines `$...` (`$__internal_0_$__cuda_sm20_div_u64`); a call of a `.L_x_N` label is
    its way of leaving a loop (`_local_call`), however the code after that label ends. Those
    that loop (`looping`) are functions of their own."""
    found: dict[str, Vector] = {}
    for ins in instructions:
        target = branch_target(ins) if ins.base == "CALL" else None
        if target is None or target not in by_label or target in found or target.startswith(".L") or target in looping:
            continue
        if "slowpath" in target:
            found[target] = ZERO  # the slow path of special operands (a division by a denormal): nearly never runs
            continue
        total = ZERO
        for body in instructions[by_label[target]:]:
            if body.base in ("EXIT", "KILL") and not body.predicated:
                break  # leaves the kernel: a branch (`_local_call`), not a subroutine
            if body.base == "RET" and not body.predicated:
                found[target] = total
                break
            total = add(total, _vector(body))
    return found


def _blocks(instructions: list[Instruction], subroutines: Collection[str]) -> tuple[list[int], list[list[int]]]:
    """Block start indices and each block's successors (as block numbers); a call of a
    subroutine (`subroutines`: labels) is a call, not a branch."""
    by_label = {label: i for i, ins in enumerate(instructions) for label in ins.labels}
    leaders = {0}
    for i, ins in enumerate(instructions):
        if ins.base in _ENDS_BLOCK or _local_call(ins, by_label, subroutines):
            if i + 1 < len(instructions):
                leaders.add(i + 1)
            for target in (branch_target(ins), *ins.targets):
                if target in by_label:
                    leaders.add(by_label[target])
        if ins.labels and i:
            leaders.add(i)
    starts = sorted(leaders)
    block_of = {start: b for b, start in enumerate(starts)}
    successors: list[list[int]] = []
    for b in range(len(starts)):
        end = starts[b + 1] if b + 1 < len(starts) else len(instructions)
        last = instructions[end - 1]
        following = [b + 1] if b + 1 < len(starts) else []
        succ: list[int]
        if last.base in ("BRA", "JMP") or _local_call(last, by_label, subroutines):
            target = branch_target(last)
            taken = [block_of[by_label[target]]] if target in by_label else []
            succ = taken + following if last.predicated else (taken or following)
        elif last.base in ("EXIT", "RET", "KILL"):
            succ = following if last.predicated else []
        elif last.targets:  # an indirect branch to the targets its jump table lists
            taken = [block_of[by_label[t]] for t in last.targets if t in by_label]
            succ = taken + following if last.predicated or not taken else taken
        else:  # fall through (BRX/JMX whose targets nvdisasm did not list: the next block stands for them)
            succ = following
        successors.append(list(dict.fromkeys(succ)))
    return starts, successors


def _local_call(ins: Instruction, by_label: dict[str, int], subroutines: Collection[str]) -> bool:
    """`@P0 CALL.REL.NOINC `(.L_x_57)``: ptxas leaves a loop through a call to a label of the
    function whose code never returns: a branch."""
    if ins.base != "CALL":
        return False
    target = branch_target(ins)
    return target in by_label and target not in subroutines


def _reachable(successors: list[list[int]]) -> set[int]:
    seen = {0}
    stack = [0]
    while stack:
        for s in successors[stack.pop()]:
            if s not in seen:
                seen.add(s)
                stack.append(s)
    return seen


def dominators(blocks: list[Block]) -> list[set[int]]:
    """Each block's dominators (itself included): the blocks every path from the entry to it passes."""
    n = len(blocks)
    preds: list[list[int]] = [[] for _ in range(n)]
    for b, block in enumerate(blocks):
        for s in block.successors:
            preds[s].append(b)
    order = _reverse_postorder(blocks)
    everything = set(range(n))
    dom = [everything.copy() for _ in range(n)]
    dom[0] = {0}
    changed = True
    while changed:
        changed = False
        for b in order:
            if b == 0:
                continue
            incoming = [dom[p] for p in preds[b]]
            new = set.intersection(*incoming) | {b} if incoming else {b}
            if new != dom[b]:
                dom[b] = new
                changed = True
    return dom


def _mark_early_exits(blocks: list[Block], dom: list[set[int]]) -> None:
    """Each block's `after_exits`: the predicated exits outside loops that dominate it. An exit
    in a loop (a thread leaving mid-loop) is no guard around the code after it."""
    exits = [b for b, block in enumerate(blocks) if block.exit_chain is not None]
    for b in exits:
        if blocks[b].loop is not None:
            blocks[b].exit_chain = None
    exits = [b for b in exits if blocks[b].exit_chain is not None]
    for b, block in enumerate(blocks):
        block.after_exits = [x for x in exits if x != b and x in dom[b]]


def _reverse_postorder(blocks: list[Block]) -> list[int]:
    seen: set[int] = set()
    post: list[int] = []
    stack: list[tuple[int, int]] = [(0, 0)]
    seen.add(0)
    while stack:
        b, i = stack.pop()
        succ = blocks[b].successors
        if i < len(succ):
            stack.append((b, i + 1))
            s = succ[i]
            if s not in seen:
                seen.add(s)
                stack.append((s, 0))
        else:
            post.append(b)
    return post[::-1]


def _loops(blocks: list[Block], instructions: list[Instruction], bounds: list[int], order: list[int],
           chain_id: Callable[[tuple[Location, ...]], int], dom: list[set[int]]) -> list[Loop]:
    preds: list[list[int]] = [[] for _ in blocks]
    for b, block in enumerate(blocks):
        for s in block.successors:
            preds[s].append(b)
    bodies: dict[int, set[int]] = {}
    latches: dict[int, list[int]] = {}
    for b, block in enumerate(blocks):
        for h in block.successors:
            if h in dom[b]:  # a back edge b -> h
                body = bodies.setdefault(h, {h})
                latches.setdefault(h, []).append(b)
                stack = [b]
                while stack:
                    x = stack.pop()
                    if x not in body:
                        body.add(x)
                        stack.extend(preds[x])
    headers = sorted(bodies, key=lambda h: len(bodies[h]), reverse=True)  # outer loops first
    loops: list[Loop] = []
    index_of: dict[int, int] = {}
    for h in headers:
        body = bodies[h]
        parent = None
        for other in reversed(loops):  # the smallest enclosing loop seen so far
            if body < set(other.blocks) and (parent is None or len(other.blocks) < len(loops[parent].blocks)):
                parent = index_of[other.header]
        index_of[h] = len(loops)
        loops.append(Loop(h, sorted(body), parent, [], []))
    # innermost loop of each block: the smallest body holding it
    for i, loop in sorted(enumerate(loops), key=lambda item: len(item[1].blocks), reverse=True):
        for b in loop.blocks:
            blocks[b].loop = i
    for i, loop in enumerate(loops):
        own = [b for b in loop.blocks if blocks[b].loop == i]
        total = ZERO
        for b in own:
            for lc in blocks[b].lines:
                total = add(total, lc.counts)
        loop.own_counts = total
        for latch in latches[loop.header]:
            last = instructions[bounds[order[latch] + 1] - 1]
            loop.latch_chains.append(chain_id(last.chain))
        code = [ins for b in loop.blocks for ins in instructions[bounds[order[b]]:bounds[order[b] + 1]]]
        loop.static_trips = _fixed_trips(loop, blocks, code, instructions,
                                         [i for b in own for i in range(bounds[order[b]], bounds[order[b] + 1])],
                                         bounds[order[loop.header]])
        own_code = [ins for b in own for ins in instructions[bounds[order[b]]:bounds[order[b] + 1]]]
        for ins in own_code:
            step = _constant_step(ins)
            register = ins.operands.split(",", 1)[0].strip()
            searched = code
            if not step and (copied := _copied_step(ins, own_code)) is not None:
                # (the sum's register is the counter's next value: where it is reused, an address)
                step, register = copied
                searched = [other for other in code if other is not ins]
            if step:
                loop.steps.append(Step(step, chain_id(ins.chain), _carries(ins), _addresses(register, searched)))
    return loops


# a register copied into another: `MOV R50, R48`, `IMAD.MOV.U32 R50, RZ, RZ, R48`
_COPY = re.compile(r"^(U?R\d+),\s*(?:U?RZ,\s*U?RZ,\s*)?(U?R\d+)\s*$")


def _copied_step(ins: Instruction, body: list[Instruction]) -> tuple[int, str] | None:
    """(|c|, Rb) for `IADD3 Ra, Rb, c, RZ` whose sum the loop copies back (`MOV Rb, Ra`): a counter
    stepped through a second register, as ptxas writes it where the next value is also tested
    (`ISETP.NE.AND P0, PT, Ra, R47, PT`), else None."""
    if ins.base not in _STEP_OPCODES or ins.predicated or "X" in ins.modifiers:
        return None
    m = _STEP.match(ins.operands)
    if not m or m.group(1) == m.group(2) or m.group(1).startswith("U") != m.group(2).startswith("U"):
        return None
    for other in body:
        if other.base in _SET_OPCODES and not other.predicated:
            copy = _COPY.match(other.operands)
            if copy and copy.group(1) == m.group(2) and copy.group(2) == m.group(1):
                return (abs(int(m.group(3), 0)), m.group(2)) if int(m.group(3), 0) else None
    return None


_PLAIN_ADDS = frozenset({"IADD3", "UIADD3", "IADD"})
_REGISTER = re.compile(r"\bU?R\d+\b")


def _addresses(register: str, body: list[Instruction]) -> bool:
    """Whether `register`, or a register the loop adds it to (`UR11 = UR14 + UR5`), is a memory
    address in the loop (`[R8]`, `[R8+0x4]`, `c[0x3][R8]`): a byte offset, not an index (an
    index is scaled, by IMAD or LEA, before it addresses anything)."""
    derived = {register}
    for _ in range(3):
        grown = set(derived)
        for ins in body:
            if ins.base in _PLAIN_ADDS:
                destination, *sources = [op.strip() for op in ins.operands.split(",")]
                if any(_REGISTER.fullmatch(op) and op in derived for op in sources):
                    grown.add(destination)
        if grown == derived:
            break
        derived = grown
    patterns = [re.compile(r"\[" + re.escape(r) + r"(?![0-9])") for r in derived]
    return any(p.search(ins.operands) for ins in body for p in patterns)


def _carries(ins: Instruction) -> bool:
    """Whether an add writes a carry-out predicate (`IADD3 R4, P0, R4, 0x4, RZ`): a 64-bit add."""
    return bool(re.match(r"^U?R\d+,\s*U?P\d+,", ins.operands))


def _constant_step(ins: Instruction) -> int | None:
    """|c| for `IADD3 Rx, Rx, c, RZ` (a register stepped by a constant), else None."""
    stepped = _stepped(ins)
    if stepped is None:
        return None
    return abs(stepped[1]) or None


def _stepped(ins: Instruction) -> tuple[str, int] | None:
    """(register, c) for `IADD3 Rx, Rx, c, RZ` (a register stepped by a constant), else None. An
    add with a carry-in (`UIADD3.X UR5, UR5, -0x1, URZ, UP0, !UPT`) is the high word of a 64-bit
    step (its constant the low word's sign), not a counter of its own."""
    if ins.base not in _STEP_OPCODES or ins.predicated or "X" in ins.modifiers:
        return None
    m = _STEP.match(ins.operands)
    if not m or m.group(1) != m.group(2):
        return None
    return m.group(1), int(m.group(3), 0)


# an immediate move into a register: `UMOV UR8, 0x3`, `MOV R5, 0x1f`, `IMAD.MOV.U32 R5, RZ, RZ, 0x1f`
_SET = re.compile(r"^(U?R\d+),\s*(?:U?RZ,\s*U?RZ,\s*)?(-?0x[0-9a-f]+|-?\d+|U?RZ)\s*$")
_SET_OPCODES = frozenset({"MOV", "UMOV", "IMAD", "MOV32I"})
# `ISETP.NE.U32.AND P0, PT, RZ, UR8, PT`: the predicate, then the two values compared
_TEST = re.compile(r"^(U?P\d+),\s*U?PT,\s*([^,]+),\s*([^,]+),\s*U?PT\s*$")
_IMMEDIATE = re.compile(r"^(-?0x[0-9a-f]+|-?\d+|U?RZ)$")
_MIRRORED = {"LT": "GT", "GT": "LT", "LE": "GE", "GE": "LE", "NE": "NE", "EQ": "EQ"}
MAX_STATIC_TRIPS = 1 << 20


def _fixed_trips(loop: Loop, blocks: list[Block], code: list[Instruction], instructions: list[Instruction],
                 own: list[int], header: int) -> float | None:
    """`static_trips` of a loop with one way out: one with a second (`break`, a data-dependent
    test beside its counter's) can end before its counter says."""
    body = set(loop.blocks)
    if sum(1 for b in loop.blocks for s in blocks[b].successors if s not in body) != 1 \
            or any(ins.base in ("EXIT", "RET", "KILL", "BREAK") for ins in code):
        return None
    return static_trips(instructions, header, sorted(own))


def static_trips(instructions: list[Instruction], header: int, own: list[int]) -> float | None:
    """The trips per entry of a loop whose code fixes them (`Loop.static_trips`): a register the
    loop's own code (`own`: instruction indices, in order) steps by a constant, set to a constant
    on the straight way into the loop (no label between the move and the header), and tested
    against a constant after its step by the compare whose predicate a branch of the loop's own
    code takes. The loop is read as ptxas lays it out, the test closing each trip (`do { ...;
    x += s; } while (x != b)`): `!=` runs (b - x0) / s trips, `<` ceil((b - x0) / s), `<=` one
    more where s divides. None where any part is missing or the trips would not be a positive
    count below `MAX_STATIC_TRIPS`."""
    branch_predicates = {predicate.lstrip("!") for i in own
                         if instructions[i].base in ("BRA", "CALL", "EXIT") and instructions[i].predicated
                         and (predicate := instructions[i].predicate) is not None}
    for at, i in enumerate(own):
        stepped = _stepped(instructions[i])
        if stepped is None:
            continue
        register, step = stepped
        start = _value_entering(instructions, header, register)
        if start is None or not step:
            continue
        for j in own[at + 1:]:
            test = instructions[j]
            if test.base not in ("ISETP", "UISETP") or "EX" in test.modifiers or test.predicated:
                continue
            t = _TEST.match(test.operands)
            if not t or t.group(1) not in branch_predicates:
                continue
            left, right = t.group(2).strip(), t.group(3).strip()
            op = next((mod for mod in test.modifiers if mod in _MIRRORED), None)
            if op is None:
                continue
            if right == register and _IMMEDIATE.match(left):
                left, right, op = right, left, _MIRRORED[op]
            if left != register or not _IMMEDIATE.match(right):
                continue
            trips = _trips(start, step, _immediate(right), op)
            if trips is not None and 1 <= trips <= MAX_STATIC_TRIPS:
                return float(trips)
            return None
    return None


def _value_entering(instructions: list[Instruction], header: int, register: str) -> int | None:
    """The constant `register` holds on entering the loop at `header` by falling into it: the
    last write before it, an immediate move, with no label (another way in) between the two."""
    for i in range(header - 1, -1, -1):
        ins = instructions[i]
        if ins.operands.split(",", 1)[0].strip() == register:
            if ins.predicated or ins.base not in _SET_OPCODES or (ins.base == "IMAD" and "MOV" not in ins.modifiers):
                return None
            m = _SET.match(ins.operands)
            return _immediate(m.group(2)) if m and m.group(1) == register else None
        if ins.labels or ins.base in _ENDS_BLOCK or ins.base == "CALL":
            return None
    return None


def _immediate(text: str) -> int:
    return 0 if text in ("RZ", "URZ") else int(text, 0)


def _trips(start: int, step: int, bound: int, op: str) -> int | None:
    """Trips of `do { x += step; } while (x OP bound)` from x = start; None where the counter
    does not head for the bound."""
    span = bound - start
    if span == 0 or (span > 0) != (step > 0):
        return None
    if op == "NE":
        return span // step if span % step == 0 else None
    if (op in ("LT", "LE") and step > 0) or (op in ("GT", "GE") and step < 0):
        trips = -(-abs(span) // abs(step))
        return trips + 1 if op in ("LE", "GE") and span % step == 0 else trips
    return None
