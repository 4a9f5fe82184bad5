"""One SparkSession for every analysis test (startup takes 10–60 s on a busy machine)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from harness.analysis.spark import SparkUnavailable, session

    try:
        s = session("local[2]", Path(tmp_path_factory.mktemp("spark-logs")),
                    shuffle_partitions=2)
    except SparkUnavailable as e:
        if os.environ.get("CI"):  # scripts/setup installs Java: missing in CI is a failure
            pytest.fail(str(e))
        pytest.skip(str(e))
    yield s
    s.stop()
