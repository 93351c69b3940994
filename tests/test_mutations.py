"""scripts/mutate.py, the mutation runner: its list stays in step with the code, and its
quick subset (one curated bug per critical promise) is caught by the tests named for it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests.conftest import PYTHON, ROOT


def mutate_module():
    spec = importlib.util.spec_from_file_location("mutate", ROOT / "scripts" / "mutate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutate"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_mutation_applies_to_the_code_as_it_is_now():
    mutate = mutate_module()
    ids = [m.id for m in mutate.MUTATIONS]
    assert len(ids) == len(set(ids))
    for m in mutate.MUTATIONS:
        text = (ROOT / m.path).read_text(encoding="utf-8")
        assert text.count(m.old) == 1, f"{m.id}: update the mutation to the code"
        assert m.new != m.old and all((ROOT / t.split("::")[0]).exists() for t in m.tests), m.id


@pytest.mark.slow
def test_the_quick_mutations_are_all_killed():
    done = subprocess.run([PYTHON, str(ROOT / "scripts" / "mutate.py"), "--quick"], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0 and ", survived 0, errors 0" in done.stdout, done.stdout + done.stderr
