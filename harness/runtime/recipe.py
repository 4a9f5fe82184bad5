"""Node recipes: what the Docker runtime runs as a broker (`hiwater campaign --runtime docker
--recipe FILE`), so the same campaign and nemesis can target any Kafka-protocol image.

A recipe is a small TOML file (docker/recipes/*.toml):

    name = "hiwater"                   # required
    image = "hiwater-node"             # required: an image on this machine; "hiwater-node" is
                                       #   the node image `hiwater docker build` makes
    command = ["broker"]               # required: the container's command (its arguments)
    mount = "/data"                    # required: where each broker's host directory is
                                       #   bind-mounted (the runtime keeps it per broker)
    data_dir = "/data/log"             # required, under mount: the broker's log dir (the
                                       #   target of wipe, lose-unflushed and corrupt)
    config_file = "/data/server.properties"  # optional, under mount: written per broker with
                                       #   the campaign's server.properties (listeners,
                                       #   advertised.listeners, log.dirs, zookeeper.connect...)
    zookeeper = true                   # optional (true): the brokers use the runtime's ZooKeeper
    admin_port = 9093                  # optional: hiwater's /replicas (live probes, leader
                                       #   targets); without it those are off
    max_brokers = 1                    # optional
    [environment]                      # optional, values may use the placeholders below
    [properties]                       # optional: extra keys for config_file
    [ready]                            # required
    kind = "kafka-metadata"            # Metadata through the proxy lists every broker
                                       #   (or "command": `docker exec` of ready.command, exit 0)
    timeout_s = 90

Placeholders in `command`, `environment` values and `ready.command`: `{broker_id}`,
`{listen_host}` (the broker's own address), `{listen_port}` (9092),
`{advertised_host}`/`{advertised_port}` (the proxy's link into this broker: what it must
advertise so every connection crosses the proxy),
`{zookeeper_connect}`, `{data_dir}`, `{mount}`.

`load_recipe` raises `RecipeError` (a ValueError: `hiwater campaign` prints it on one line and
exits 3) for a missing or ill-typed field, an unknown key or a path outside `mount`.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RECIPES_DIR = Path(__file__).resolve().parents[2] / "docker" / "recipes"
HIWATER_IMAGE = "hiwater-node"
READY_KINDS = ("kafka-metadata", "command")
PLACEHOLDERS = ("broker_id", "listen_host", "listen_port", "advertised_host",
                "advertised_port", "zookeeper_connect", "data_dir", "mount")
REQUIRED = ("name", "image", "command", "mount", "data_dir", "ready")
OPTIONAL = ("config_file", "zookeeper", "admin_port", "max_brokers", "environment",
            "properties")


class RecipeError(ValueError):
    pass


@dataclass(frozen=True)
class Recipe:
    name: str
    image: str
    command: tuple[str, ...]
    mount: str
    data_dir: str
    ready_kind: str = "kafka-metadata"
    ready_command: tuple[str, ...] = ()
    ready_timeout_s: float = 90.0
    config_file: str | None = None
    zookeeper: bool = True
    admin_port: int | None = None
    max_brokers: int | None = None
    environment: dict[str, str] = field(default_factory=dict)
    properties: dict[str, str] = field(default_factory=dict)
    path: Path | None = None

    @property
    def builtin_image(self) -> bool:
        return self.image == HIWATER_IMAGE

    def host_path(self, node_dir: Path, container_path: str) -> Path:
        """Where a path under `mount` is on the host, for a broker whose directory is
        `node_dir`."""
        rel = Path(container_path).relative_to(self.mount)
        return node_dir / rel


def _where(path: Path | None) -> str:
    return f"recipe {path}" if path is not None else "recipe"


def _str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _str_map(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(x, str | int | float | bool)
                                       for x in v.values())


def _check_placeholders(where: str, texts: list[str]) -> None:
    for t in texts:
        try:
            t.format(**dict.fromkeys(PLACEHOLDERS, ""))
        except (KeyError, IndexError, ValueError) as e:
            raise RecipeError(f"{where}: {t!r}: unknown placeholder {e} (known: "
                              f"{', '.join('{' + p + '}' for p in PLACEHOLDERS)})") from None


def parse_recipe(data: dict[str, Any], path: Path | None = None) -> Recipe:
    where = _where(path)
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise RecipeError(f"{where}: missing field {', '.join(repr(k) for k in missing)}")
    unknown = sorted(set(data) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise RecipeError(f"{where}: unknown field {', '.join(repr(k) for k in unknown)}")
    for k in ("name", "image", "mount", "data_dir"):
        if not isinstance(data[k], str) or not data[k]:
            raise RecipeError(f"{where}: {k!r} must be a non-empty string")
    if not _str_list(data["command"]):
        raise RecipeError(f"{where}: 'command' must be a list of strings")
    mount = data["mount"]
    if not mount.startswith("/"):
        raise RecipeError(f"{where}: 'mount' must be an absolute path")
    for k in ("data_dir", "config_file"):
        v = data.get(k)
        if v is None:
            continue
        if not isinstance(v, str) or not Path(v).is_relative_to(mount) or Path(v) == Path(mount):
            raise RecipeError(f"{where}: {k!r} must be a path under mount ({mount})")
    ready = data["ready"]
    if not isinstance(ready, dict) or ready.get("kind") not in READY_KINDS:
        raise RecipeError(f"{where}: 'ready' needs kind = one of {', '.join(READY_KINDS)}")
    ready_command = ready.get("command", [])
    if ready["kind"] == "command" and (not _str_list(ready_command) or not ready_command):
        raise RecipeError(f"{where}: ready kind 'command' needs command = [...]")
    timeout = ready.get("timeout_s", 90)
    if not isinstance(timeout, int | float) or timeout <= 0:
        raise RecipeError(f"{where}: ready.timeout_s must be a positive number")
    for k in ("environment", "properties"):
        if k in data and not _str_map(data[k]):
            raise RecipeError(f"{where}: {k!r} must be a table of plain values")
    for k in ("admin_port", "max_brokers"):
        if k in data and (not isinstance(data[k], int) or data[k] < 1):
            raise RecipeError(f"{where}: {k!r} must be a positive integer")
    if "zookeeper" in data and not isinstance(data["zookeeper"], bool):
        raise RecipeError(f"{where}: 'zookeeper' must be true or false")
    env = {str(k): str(v) for k, v in data.get("environment", {}).items()}
    _check_placeholders(where, [*data["command"], *env.values(), *ready_command])
    return Recipe(
        name=data["name"], image=data["image"], command=tuple(data["command"]), mount=mount,
        data_dir=data["data_dir"], ready_kind=ready["kind"],
        ready_command=tuple(ready_command), ready_timeout_s=float(timeout),
        config_file=data.get("config_file"), zookeeper=data.get("zookeeper", True),
        admin_port=data.get("admin_port"), max_brokers=data.get("max_brokers"),
        environment=env,
        properties={str(k): str(v) for k, v in data.get("properties", {}).items()},
        path=path)


def load_recipe(path: Path | str) -> Recipe:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise RecipeError(f"recipe {path}: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise RecipeError(f"recipe {path}: not TOML: {e}") from None
    return parse_recipe(data, path)


def hiwater_recipe() -> Recipe:
    """The default: docker/recipes/hiwater.toml."""
    return load_recipe(RECIPES_DIR / "hiwater.toml")
