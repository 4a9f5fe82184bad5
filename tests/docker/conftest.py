"""The Docker runtime's tests. Without a reachable Docker engine they skip with the reason,
except under CI (env CI set), where that is a failure. Images are built once per test process
(`build_images`, cached: only the first build of a machine is slow) and the times are printed
(`pytest -s`) and kept in `store/docker-test-timings.json`."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from harness.runtime import docker as hd

TIMINGS = Path(__file__).resolve().parents[2] / "store" / "docker-test-timings.json"


def require_docker() -> None:
    why = hd.engine_unavailable_reason()
    if why is None and os.geteuid() != 0 and not hd.image_exists(hd.BASE_IMAGE):
        why = "building the base image needs root (debootstrap)"
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"Docker runtime tests need a Docker engine: {why}")
        pytest.skip(why)


def record_timing(name: str, seconds: float) -> None:
    TIMINGS.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(TIMINGS.read_text()) if TIMINGS.exists() else {}
    data[name] = round(seconds, 1)
    TIMINGS.write_text(json.dumps(data, indent=2))
    print(f"[docker timing] {name}: {seconds:.1f} s")


@pytest.fixture(scope="session")
def node_image() -> str:
    require_docker()
    cold = not hd.image_exists(hd.BASE_IMAGE)
    t0 = time.monotonic()
    ref = hd.build_images(log=lambda m: print(f"[docker build] {m}"))
    record_timing("build_images_cold" if cold else "build_images", time.monotonic() - t0)
    return ref
