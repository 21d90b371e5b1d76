"""The four tier folders stay parallel: same modules, same signatures."""
import importlib
import inspect

import pytest

from tiers import registry


@pytest.mark.parametrize("name", list(registry.ALGORITHMS))
def test_same_signature_in_every_tier(name):
    alg = registry.ALGORITHMS[name]
    for entry in alg.entries:
        sigs = {t: inspect.signature(registry.get(name, t, entry)) for t in alg.tiers}
        first = sigs[alg.tiers[0]]
        for tier, sig in sigs.items():
            assert sig == first, f"{tier}.{alg.name}.{entry}{sig} differs from {alg.tiers[0]}{first}"


def test_every_tier_module_exists_in_all_tiers():
    import pkgutil
    names = {}
    for tier in registry.TIERS:
        pkg = importlib.import_module(f"tiers.{tier}")
        names[tier] = {m.name for m in pkgutil.iter_modules(pkg.__path__)}
    union = set().union(*names.values())
    for tier, have in names.items():
        assert have == union, f"{tier} lacks {sorted(union - have)}"
