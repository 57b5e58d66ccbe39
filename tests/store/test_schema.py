"""``pipeline.store.schema``: each table's schema is defined once."""

import ast
from pathlib import Path

import pipeline.store.schema as schema


def test_every_schema_constant_is_assigned_once():
    tree = ast.parse(Path(schema.__file__).read_text())
    names = [
        t.id
        for node in tree.body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Name)
    ]
    assert "SAMPLE" in names and "STEPS" in names
    assert sorted({n for n in names if names.count(n) > 1}) == []
    assert schema.SAMPLE == schema.sample_schema()  # the one definition: the samples of the axes in force
