"""The .pyi stubs name exactly what the modules bind."""
import ast
import os

import pytest
import tent
from mooncake import engine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def stub_names(path):
    tree = ast.parse(open(path).read())
    top, classes = set(), {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            top.add(node.name)
            classes[node.name] = {
                n.name for n in node.body if isinstance(n, ast.FunctionDef)
                and not n.name.startswith("_")
            }
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [
                node.target
            ]
            top.update(t.id for t in targets if isinstance(t, ast.Name))
    return top, classes


def public(obj):
    return {n for n in dir(obj) if not n.startswith("_")}


@pytest.mark.parametrize("module,path", [
    (engine, os.path.join(ROOT, "mooncake", "engine.pyi")),
    (tent, os.path.join(ROOT, "tent.pyi")),
])
def test_stub_matches_module(module, path):
    top, classes = stub_names(path)
    top.discard("Memory")  # a stub-only alias
    # Enum members exported to module level (export_values()).
    exported = {
        n for n in public(module)
        if not isinstance(getattr(module, n), type) and
        type(getattr(module, n)).__name__ in classes
    }
    assert top - exported == public(module) - exported
    for name, methods in classes.items():
        cls = getattr(module, name)
        if methods and isinstance(cls, type) and not issubclass(
                cls, BaseException):
            bound = {n for n in public(cls)
                     if callable(getattr(cls, n)) and
                     not isinstance(getattr(cls, n), type)}
            assert methods == bound, name
