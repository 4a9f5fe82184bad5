"""Node recipes (harness/runtime/recipe.py): the shipped ones parse, a broken one is one line
and exit 3 before anything starts, and a campaign runs from a recipe on an image built here
(tests/docker/single/recipe.toml: the node image under a name of its own, running ZooKeeper
and one hiwater broker in one container by the recipe's command, with environment
placeholders and a `command` readiness check) with SIGSTOP pauses of the broker process
(`--docker-pause sigstop`). (A `docker build` of a one-step image on top took over 2 min of
this loaded machine's fuse-overlayfs; a tag is instant.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.campaign import CampaignOptions
from harness.runtime import docker as hd
from harness.runtime.recipe import RECIPES_DIR, RecipeError, load_recipe
from tests.docker.conftest import record_timing

REPO = Path(__file__).resolve().parents[2]
SINGLE = Path(__file__).resolve().parent / "single"


def _hiwater(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from harness.cli import main; main()", *args],
        capture_output=True, text=True, timeout=900, cwd=REPO, env=dict(os.environ),
        check=False)


def test_shipped_recipes_parse() -> None:
    hiwater = load_recipe(RECIPES_DIR / "hiwater.toml")
    assert hiwater.builtin_image and hiwater.zookeeper and hiwater.admin_port == 9093
    assert hiwater.host_path(Path("/h/n1"), hiwater.data_dir) == Path("/h/n1/log")
    kafka = load_recipe(RECIPES_DIR / "kafka-single.toml")
    assert kafka.max_brokers == 1 and not kafka.zookeeper
    assert kafka.environment["KAFKA_ADVERTISED_LISTENERS"] == \
        "PLAINTEXT://{advertised_host}:{advertised_port}"
    compose = hd.render_compose(1, kafka)
    assert '"PLAINTEXT://${HIWATER_NET}.11:9101"' in compose and "zk:" not in compose
    assert "image: ${HIWATER_BROKER_IMAGE}" in compose


def test_recipe_with_a_missing_field_is_exit_3_with_one_line(tmp_path: Path) -> None:
    lines = (SINGLE / "recipe.toml").read_text().splitlines()
    no_ready = tmp_path / "no-ready.toml"
    no_ready.write_text("\n".join(lines[:lines.index("[ready]")]) + "\n")
    with pytest.raises(RecipeError, match="missing field 'ready'"):
        load_recipe(no_ready)
    bad = tmp_path / "bad.toml"
    bad.write_text("\n".join(x for x in lines if not x.startswith("image =")) + "\n")
    why = "missing field 'image'"
    with pytest.raises(RecipeError, match=why):
        load_recipe(bad)
    store = tmp_path / "store"
    r = _hiwater("campaign", "--runtime", "docker", "--recipe", str(bad), "--brokers", "1",
                 "--store", str(store))
    assert r.returncode == 3, r.stderr
    assert r.stderr.strip().splitlines() == [f"hiwater campaign: recipe {bad}: {why}"]
    assert not store.exists()  # nothing started, no run directory


def test_recipe_errors_name_the_problem(tmp_path: Path) -> None:
    base = (SINGLE / "recipe.toml").read_text()
    cases = {
        'data_dir = "/data/log"': ('data_dir = "/elsewhere"', "must be a path under mount"),
        'ZK_HEAP_MB = "128"': ('ZK_HEAP_MB = "{heap}"', "unknown placeholder 'heap'"),
        'zookeeper = false': ('zookeeper = false\ncolour = "red"', "unknown field 'colour'"),
        'kind = "command"': ('kind = "tcp"', "ready' needs kind"),
    }
    for old, (new, why) in cases.items():
        path = tmp_path / "r.toml"
        path.write_text(base.replace(old, new))
        with pytest.raises(RecipeError, match=why):
            load_recipe(path)
    (tmp_path / "r.toml").write_text("name = [")
    with pytest.raises(RecipeError, match="not TOML"):
        load_recipe(tmp_path / "r.toml")
    with pytest.raises(ValueError, match="need --runtime docker"):
        CampaignOptions(recipe=SINGLE / "recipe.toml")
    with pytest.raises(ValueError, match="runs at most 1 broker"):
        CampaignOptions(runtime="docker", recipe=SINGLE / "recipe.toml", brokers=3)
    with pytest.raises(ValueError, match="--docker-pause must be one of freeze, sigstop"):
        CampaignOptions(runtime="docker", docker_pause="sleep")


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_campaign_on_an_image_built_here_with_sigstop_pauses(node_image: str,
                                                            tmp_path: Path) -> None:
    recipe = load_recipe(SINGLE / "recipe.toml")
    hd.docker("tag", node_image, recipe.image)
    t0 = time.monotonic()
    r = _hiwater("campaign", "--runtime", "docker", "--recipe", str(SINGLE / "recipe.toml"),
                 "--brokers", "1", "--rf", "1", "--min-isr", "1", "--nemesis", "pause",
                 "--docker-pause", "sigstop", "--nemesis-interval", "3", "--time-limit", "12",
                 "--seed", "5", "--name", "single", "--store", str(tmp_path))
    record_timing("recipe_single_campaign_12s", time.monotonic() - t0)
    run = (tmp_path / "single" / "latest").resolve()
    assert r.returncode == 0, (r.stdout[-1500:], r.stderr[-1500:])
    info = json.loads((run / "logs" / "runtime.json").read_text())
    assert info["recipe"]["name"] == "hiwater-single"
    assert info["recipe"]["broker_image"] == recipe.image
    assert info["pause_mode"] == "sigstop"
    assert "zookeeper.log" not in {p.name for p in (run / "logs").iterdir()}
    # the environment's placeholders, filled per broker; the recipe's command ran
    n1_log = (run / "logs" / "n1.log").read_text()
    assert f"single-node broker n1 advertised as {info['addresses']['proxy']}:9101" in n1_log
    # the broker process was stopped and continued: pauses happened, and the history is valid
    history = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    pauses = [op for op in history if op["process"] == "nemesis" and op["f"] == "pause"]
    assert any(op["value"] == {"n1": "paused"} for op in pauses), pauses
    results = json.loads((run / "results.json").read_text())
    assert results["verdict"] == "valid"
    assert results["probes"]["samples"] > 0  # admin_port: the live probe ran
    assert not any(hd.labelled(k, info["run_id"]) for k in ("container", "network", "volume"))


def _recipe_like_single(tmp_path: Path, image: str, command: str | None = None) -> Path:
    """tests/docker/single/recipe.toml with another image (and command)."""
    text = (SINGLE / "recipe.toml").read_text()
    lines = [f'image = "{image}"' if x.startswith("image =") else x for x in text.splitlines()]
    text = "\n".join(lines) + "\n"
    if command is not None:
        start, end = text.index("command = ["), text.index("]\nmount =") + 1
        text = text[:start] + f"command = {json.dumps(['sh', '-c', command])}" + text[end:]
    path = tmp_path / "recipe.toml"
    path.write_text(text)
    return path


def test_recipe_image_not_on_this_machine_is_exit_3_with_one_line(tmp_path: Path) -> None:
    from tests.docker.conftest import require_docker

    require_docker()
    recipe = _recipe_like_single(tmp_path, "hiwater/no-such-image:none")
    store = tmp_path / "store"
    r = _hiwater("campaign", "--runtime", "docker", "--recipe", str(recipe), "--brokers", "1",
                 "--rf", "1", "--min-isr", "1", "--store", str(store))
    assert r.returncode == 3, r.stderr
    assert r.stderr.strip().splitlines() == [
        "hiwater campaign: recipe hiwater-single: image hiwater/no-such-image:none is not on "
        "this machine (docker load or docker pull it first)"]
    assert not store.exists()  # said before anything started


def test_image_that_does_not_start_is_exit_3_and_leaves_nothing(node_image: str,
                                                               tmp_path: Path) -> None:
    """A broker image whose container exits at once: the campaign ends in a few seconds with
    exit 3, the error names the node and what it said, its log is in the run directory, and
    nothing of the run is left running."""
    image = f"hiwater/crash-test-{os.getpid()}:latest"
    recipe = _recipe_like_single(tmp_path, image,
                                 "echo 'broken image: no broker in here' >&2; exit 1")
    hd.docker("tag", node_image, image)
    try:
        t0 = time.monotonic()
        r = _hiwater("campaign", "--runtime", "docker", "--recipe", str(recipe),
                     "--brokers", "1", "--rf", "1", "--min-isr", "1", "--time-limit", "10",
                     "--name", "crash", "--store", str(tmp_path / "store"))
        took = time.monotonic() - t0
    finally:
        hd.docker("image", "rm", image, check=False)  # the tag alone: the image is shared
    assert r.returncode == 3, (r.stdout[-1500:], r.stderr[-1500:])
    errors = [x for x in r.stderr.splitlines() if x.startswith("error: ")]
    assert len(errors) == 1 and "cluster not ready" in errors[0], r.stderr
    assert "exited: n1:" in errors[0] and "broken image: no broker in here" in errors[0]
    assert took < 150, took  # not the recipe's whole ready timeout (150 s)
    run = (tmp_path / "store" / "crash" / "latest").resolve()
    results = json.loads((run / "results.json").read_text())
    assert results["verdict"] == "unknown" and results["exit_code"] == 3
    assert "broken image" in (run / "logs" / "n1.log").read_text()
    info = json.loads((run / "logs" / "runtime.json").read_text())
    assert not any(hd.labelled(k, info["run_id"]) for k in ("container", "network", "volume"))
