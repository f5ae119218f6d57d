"""Struct fields the host code sets one by one (`params p; p.n = 1 << 20; p.iters = 8;`):
each is bound by its path (`p.n`), which `p.n` in a later fold reads. Setting or declaring
`p` again, or taking its address, forgets them. And where a class or struct declares its fields."""

from __future__ import annotations

from collections.abc import Callable

from tree_sitter import Node

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


_CLASS_KINDS = ("class_specifier", "struct_specifier")
_SCOPES = ("translation_unit", "namespace_definition", "declaration_list", "template_declaration",
           "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "linkage_specification",
           "declaration", "field_declaration_list", "field_declaration")


def field_declarations(root: Node, data: bytes, class_name: str) -> list[Node]:
    """`field_declaration` nodes of the class or struct named `class_name` under `root`
    (namespaces, templates and `#if` blocks searched; function bodies not; `typedef struct {...} T;`)."""
    stack = [root]
    while stack:
        node = stack.pop()
        for child in node.named_children:
            if child.type in _CLASS_KINDS or child.type == "type_definition":
                typedef = child.type == "type_definition"
                name = child.child_by_field_name("declarator" if typedef else "name")
                body = (child.child_by_field_name("type") or child).child_by_field_name("body")
                if name is not None and body is not None and \
                        data[name.start_byte : name.end_byte].decode("utf-8", errors="replace") == class_name:
                    return [c for c in body.named_children if c.type == "field_declaration"]
            if child.type in _SCOPES or child.type in _CLASS_KINDS:
                stack.append(child)
    return []
