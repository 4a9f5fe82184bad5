"""`DockerRuntime`: ZooKeeper, N hiwater brokers and the Toxiproxy-API proxy as containers on a
private Docker network of their own (`hiwater campaign --runtime docker`).

Images (`hiwater docker build`, `build_images`): `hiwater/base:bookworm` is made locally by
`docker/base/build.sh` (debootstrap + `docker import`, no registry), `hiwater/node` from
`docker/node/Dockerfile` (uv and the locked dependencies in their own layer, then the source).
The node image is tagged with a hash of its build context (`hiwater/node:src-<hash>`), so an
unchanged tree starts without any build step and a changed one rebuilds only the source layer.

A run (`run_id`, every container, network and volume labelled `hiwater.run=<run_id>` and
`hiwater.pid=<pid>:<start time>` of the process that owns it):

- a bridge network `hiwater-<run_id>` on a /24 chosen free among Docker's networks and this
  machine's routes, with fixed addresses: ZooKeeper `.10`, the proxy `.11`, broker i `.(20+i)`;
- `docker-compose -p hiwater-<run_id>` over the compose file `render_compose()` writes
  (`docker/compose.yaml` is its output for 3 brokers, usable by hand);
- every node's `/data` is a bind mount of `<base_dir>/<node>` (configuration, data, logs), so
  the disk faults run `harness.runtime.disk` on the host directly.

Traffic: broker i listens on its own address, port 9092, and advertises the proxy's
`.11:(9100+i)`; the proxy forwards that port to broker i. Clients (on the host) and the other
brokers reach broker i only through the proxy, so a toxic on `n<i>` applies to every
connection into broker i, between containers too (as `LocalRuntime(proxies=True)`). Besides,
with up to 9 brokers, every ordered pair of brokers has a link of its own: in the proxy
container a nat rule redirects broker s's connections to port 9100+d to the link
`n<s>-to-n<d>` (port 20000+100 s+d), so `add_toxic(d, ..., source=s)` slows (or cuts) only
what goes between s and d: with `stream="downstream"`, what d sends to s (d's answers to s's
requests: a leader d's fetch responses to its follower s). Brokers talk to ZooKeeper directly.

Faults:

- `kill`: `docker kill -s KILL` (the broker is the container's PID 1: the container stops);
  `stop_node`: `docker stop` (SIGTERM: controlled shutdown); `start_node`: `docker start`
  (after ZooKeeper has dropped the old registration); `pause`/`resume`: with
  `pause_mode="freeze"` (the default) `docker pause` (the cgroup freezer: the processes cannot
  see or catch it) / `docker unpause`; with `pause_mode="sigstop"` SIGSTOP / SIGCONT of the
  broker process (`docker kill -s STOP`: sent from outside its PID namespace, so it reaches
  the container's PID 1; a GC pause as the local runtime makes one);
- `wipe`, `lose_unflushed`, `corrupt_segment`: `harness.runtime.disk` on the bind mount;
- `partition`/`heal`: iptables inside the two containers that are never paused or killed. A
  grudge "dst ignores src" between brokers is two rules in the proxy container: src's packets
  to dst's proxy port (`INPUT -s src --dport P(dst)`) and the proxy's packets that carry src's
  answers to dst (`OUTPUT -d dst --sport P(src)`), exactly what LocalRuntime drops on
  loopback (matched on the connection's original destination port, `-m conntrack
  --ctorigdstport`, so the per-pair redirects change nothing); between a broker and ZooKeeper
  the rule is in the ZooKeeper container (`INPUT -s broker` / `OUTPUT -d broker`). `heal`
  flushes both containers' INPUT/OUTPUT (the nat table's redirects stay).

Everything of the run is removed by `stop()` (idempotent), also at interpreter exit or on
SIGTERM/SIGHUP (`harness.runtime.cleanup`); containers, networks and volumes of runs whose
owning process is gone are swept by label at the next start (`sweep_stale`).

In a harness container (`--harness container`, harness/runtime/harness_container.py) the
runtime attaches that container to the run's network and detaches it before removing the
network, labels everything with the host command as owner, runs the node image the host
built, and leaves sweeping to the host command.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import ipaddress
import json
import os
import random
import re
import secrets
import shutil
import subprocess
import tarfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from harness.runtime import cleanup
from harness.runtime.base import (
    ZOOKEEPER_NODE,
    BrokerState,
    ClusterRuntimeError,
    FaultReport,
    FaultUnsupported,
    Grudge,
    NodeStateError,
    Runtime,
    node_id,
    node_name,
    normalize_grudge,
)
from harness.runtime.recipe import Recipe, hiwater_recipe

# harness.runtime.disk (the broker's store: lz4, crc32c...) is imported where a disk fault
# runs: the launcher of `--harness container` (harness_container.py) needs the standard
# library alone

REPO = Path(__file__).resolve().parents[2]
BASE_IMAGE = "hiwater/base:bookworm"
# where a registry is reachable (users' CI), e.g. debian:bookworm-slim instead of debootstrap
BASE_ENV = "HIWATER_DOCKER_BASE"
NODE_REPO = "hiwater/node"
LABEL = "hiwater.run"
OWNER_LABEL = "hiwater.pid"
# the harness in a container (harness/runtime/harness_container.py): its container carries
# ROLE_LABEL=HARNESS_ROLE; inside it, the host command's owner label, the container's name,
# its run id and the node image to run come in these variables
ROLE_LABEL = "hiwater.role"
HARNESS_ROLE = "harness"
HARNESS_OWNER_ENV = "HIWATER_HARNESS_OWNER"
HARNESS_CONTAINER_ENV = "HIWATER_HARNESS_CONTAINER"
HARNESS_RUN_ENV = "HIWATER_HARNESS_RUN"
NODE_IMAGE_ENV = "HIWATER_NODE_IMAGE"
BROKER_PORT = 9092
ADMIN_PORT = 9093
PROXY_BASE_PORT = 9100
# per-pair links: broker s's connections to broker d's proxy port are redirected (nat
# PREROUTING in the proxy container) to a link of their own, `pair_link(s, d)`, on
# PAIR_BASE_PORT + 100 s + d; for up to PAIR_LINKS_MAX_BROKERS brokers (n (n-1) links)
PAIR_BASE_PORT = 20000
PAIR_LINKS_MAX_BROKERS = 9
TOXIPROXY_API_PORT = 8474
ZK_PORT = 2181
ZK_HOST, PROXY_HOST, BROKER_HOST0 = 10, 11, 20
MAX_BROKERS = 200
DOCKER_TIMEOUT_S = 60.0
BUILD_TIMEOUT_S = 3600.0
# the node image's build context (see docker/node/Dockerfile): name in the context <- repo path
CONTEXT_FILES = ("pyproject.toml", "uv.lock", "docker/node/Dockerfile")
# pyproject.toml names a readme; the dependency layer gets a fixed one, so that README edits
# do not invalidate it (they did: every README change re-ran `uv sync`)
README_PLACEHOLDER = b"# hiwater\n\nThe node image of harness/runtime/docker.py.\n"
# what a node runs (broker, ZooKeeper, proxy) imports only these: harness/, spec/ and the
# nemesis's schedules, faults and executors (run by the harness on the host) need no rebuild
SOURCE_DIRS = ("core", "broker", "nemesis/toxiproxy")
SOURCE_FILES = ("nemesis/__init__.py",)
# node image tags kept besides the one just built (other worktrees and branches of this
# machine use theirs: removing them made each build elsewhere start from the source layer)
NODE_TAGS_KEPT = 4
# the build machine's locally trusted CAs (Debian's place for them), copied into the image so
# pip and uv inside the build trust what the host trusts (e.g. a TLS-inspecting egress proxy)
LOCAL_CA_DIR = Path("/usr/local/share/ca-certificates")


PAUSE_MODES = ("freeze", "sigstop")


class DockerError(ClusterRuntimeError):
    """A docker command failed, or no engine is reachable."""


class DockerUnavailable(DockerError):
    pass


# ---------------------------------------------------------------------------------------------
# the docker command


def _docker_cmd() -> list[str]:
    return ["docker"]


def docker(*args: str, timeout_s: float = DOCKER_TIMEOUT_S, check: bool = True,
           input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run `docker ARGS` (bounded). Raises DockerError naming the command when it fails."""
    try:
        r = subprocess.run([*_docker_cmd(), *args], input=input, capture_output=True,
                           timeout=timeout_s, check=False)
    except FileNotFoundError:
        raise DockerUnavailable("the docker command is not installed") from None
    except subprocess.TimeoutExpired:
        raise DockerError(f"docker {' '.join(args[:3])} timed out after {timeout_s:.0f} s") \
            from None
    if check and r.returncode != 0:
        msg = r.stderr.decode(errors="replace").strip().splitlines()
        raise DockerError(f"docker {' '.join(args[:3])}: {msg[-1] if msg else r.returncode}")
    return r


def _out(*args: str, timeout_s: float = DOCKER_TIMEOUT_S) -> str:
    return docker(*args, timeout_s=timeout_s).stdout.decode().strip()


def engine_unavailable_reason() -> str | None:
    """None when a Docker engine answers, else one line saying why not."""
    if shutil.which("docker") is None:
        return "the docker command is not installed (Debian package docker.io)"
    try:
        r = subprocess.run([*_docker_cmd(), "version", "--format", "{{.Server.Version}}"],
                           capture_output=True, timeout=15, check=False)
    except subprocess.TimeoutExpired:
        return "no Docker engine answered within 15 s"
    if r.returncode != 0 or not r.stdout.strip():
        where = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        return f"no Docker engine is running at {where} (start dockerd, or set DOCKER_HOST)"
    return None


def require_engine() -> None:
    reason = engine_unavailable_reason()
    if reason is not None:
        raise DockerUnavailable(reason)


def image_exists(ref: str) -> bool:
    return docker("image", "inspect", ref, check=False, timeout_s=30).returncode == 0


# ---------------------------------------------------------------------------------------------
# images


def _context_paths(root: Path) -> list[tuple[str, Path]]:
    out = [(f, root / f) for f in CONTEXT_FILES]
    out.append(("deps/packages.txt", root / "docker/node/packages.txt"))
    out.append(("src/docker/node/entrypoint.sh", root / "docker/node/entrypoint.sh"))
    for f in SOURCE_FILES:
        out.append((f"src/{f}", root / f))
    for d in SOURCE_DIRS:
        for p in sorted((root / d).rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".pyc"):
                out.append((f"src/{p.relative_to(root).as_posix()}", p))
    return out


def _ca_files() -> list[tuple[str, Path]]:
    if not LOCAL_CA_DIR.is_dir():
        return []
    return [(f"deps/ca/{p.name}", p) for p in sorted(LOCAL_CA_DIR.glob("*.crt"))
            if p.is_file()]


def build_context(root: Path = REPO) -> tuple[bytes, str]:
    """The node image's build context as a tar (fixed times and owners, so equal trees give
    equal bytes) and the hash of its contents."""
    return pack_context([*_context_paths(root), *_ca_files()], [("deps/ca/.keep", b"")])


def pack_context(files: Iterable[tuple[str, Path]],
                 extra: Iterable[tuple[str, bytes]] = ()) -> tuple[bytes, str]:
    """A build context (name in the context <- file), with README_PLACEHOLDER as README.md,
    as a tar and the hash of its contents."""
    buf = io.BytesIO()
    h = hashlib.sha256()
    entries: list[tuple[str, bytes, int]] = [
        *((name, data, 0o644) for name, data in extra), ("README.md", README_PLACEHOLDER, 0o644)]
    for name, path in files:
        entries.append((name, path.read_bytes(),
                        0o755 if os.access(path, os.X_OK) else 0o644))
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data, mode in entries:
            h.update(f"{name}\0{mode}\0{len(data)}\0".encode())
            h.update(data)
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue(), h.hexdigest()


def build_base(image: str = BASE_IMAGE, force: bool = False,
               log: Callable[[str], None] = print) -> None:
    """`docker/base/build.sh` (debootstrap + docker import), skipped when the image exists."""
    if not force and image_exists(image):
        return
    env = dict(os.environ, FORCE="1" if force else "0")
    script = REPO / "docker" / "base" / "build.sh"
    log(f"building the base image {image} (debootstrap; a few minutes)")
    r = subprocess.run(["bash", str(script), image], env=env, timeout=BUILD_TIMEOUT_S,
                       check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    text = r.stdout.decode(errors="replace").strip()
    if r.returncode != 0:
        raise DockerError(f"{script.relative_to(REPO)} failed ({r.returncode}): "
                          f"{text.splitlines()[-1] if text else ''}")
    for line in text.splitlines()[-1:]:
        log(line)


BUILD_LOCK = Path("/tmp/hiwater-docker-build.lock")


@contextlib.contextmanager
def build_lock(timeout_s: float = BUILD_TIMEOUT_S) -> Iterator[None]:
    """One image build at a time on this machine (test workers, campaigns side by side)."""
    with open(BUILD_LOCK, "a") as f:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise DockerError(f"another image build held {BUILD_LOCK} for "
                                      f"{timeout_s:.0f} s") from None
                time.sleep(1.0)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def default_base() -> str:
    return os.environ.get(BASE_ENV) or BASE_IMAGE


def build_images(base: str | None = None, force: bool = False,
                 log: Callable[[str], None] = print, root: Path = REPO) -> str:
    """Make sure the node image for this tree exists (building what is missing, with Docker's
    cache) and return its reference `hiwater/node:src-<hash>`. The base: `base`, else
    $HIWATER_DOCKER_BASE, else the debootstrapped hiwater/base:bookworm."""
    base = base or default_base()
    require_engine()
    with build_lock():
        return _build_images(base, force, log, root)


def _build_images(base: str, force: bool, log: Callable[[str], None], root: Path) -> str:
    if base == BASE_IMAGE:
        build_base(base, force=False, log=log)
    elif not image_exists(base):
        raise DockerError(f"base image {base} does not exist (and no registry is assumed)")
    context, digest = build_context(root)
    base_id = _out("image", "inspect", "--format", "{{.Id}}", base, timeout_s=30)
    tag = hashlib.sha256(f"{digest}\0{base}\0{base_id}".encode()).hexdigest()[:16]
    ref = f"{NODE_REPO}:src-{tag}"
    if not force and image_exists(ref):
        return ref
    log(f"building {ref} from docker/node/Dockerfile (FROM {base})")
    t0 = time.monotonic()
    args = ["build", "--network", "host", "--force-rm", "-f", "docker/node/Dockerfile",
            "--build-arg", f"BASE={base}",
            "-t", ref, "-t", f"{NODE_REPO}:latest"]
    if force:
        args.append("--no-cache")
    r = docker(*args, "-", input=context, timeout_s=BUILD_TIMEOUT_S, check=False)
    if r.returncode != 0:
        tail = (r.stdout + r.stderr).decode(errors="replace").strip().splitlines()[-15:]
        raise DockerError("docker build of the node image failed:\n" + "\n".join(tail))
    log(f"built {ref} in {time.monotonic() - t0:.1f} s")
    prune_tags(NODE_REPO, ref)
    return ref


def prune_tags(repo: str, keep: str) -> None:
    """Remove the image's source tags but the newest NODE_TAGS_KEPT (their unique layers
    are only the source); a tag a container uses stays (docker refuses without -f)."""
    listed = _out("image", "ls", "--format", "{{.Repository}}:{{.Tag}} {{.CreatedAt}}",
                  repo).splitlines()
    tags = sorted((line.split(" ", 1) for line in listed if " " in line),
                  key=lambda t: t[1], reverse=True)
    old = [t for t, _ in tags if t.startswith(f"{repo}:src-") and t != keep]
    for tag in old[NODE_TAGS_KEPT:]:
        docker("image", "rm", tag, check=False)


# ---------------------------------------------------------------------------------------------
# owners, stale runs


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def owner_label(pid: int | None = None) -> str:
    """`<pid>:<start time>` of the process that owns a run: this one, or in a harness
    container the host command that started it (which removes the run when it ends)."""
    if pid is None and (host := os.environ.get(HARNESS_OWNER_ENV)):
        return host
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{_start_time(pid)}"


def harness_container_name() -> str | None:
    """The name of the harness container this process runs in (None: on the host)."""
    return os.environ.get(HARNESS_CONTAINER_ENV) or None


def owner_alive(label: str) -> bool:
    pid, _, start = label.partition(":")
    if not pid.isdigit():
        return True  # not ours to judge
    return _start_time(int(pid)) == start


def labelled(kind: str, run_id: str | None = None) -> list[tuple[str, dict[str, str]]]:
    """(id, labels) of every container/network/volume labelled hiwater.run (of one run)."""
    flt = f"label={LABEL}" if run_id is None else f"label={LABEL}={run_id}"
    if kind == "container":
        ids = _out("ps", "-aq", "--filter", flt).split()
    elif kind == "network":
        ids = _out("network", "ls", "-q", "--filter", flt).split()
    else:
        ids = _out("volume", "ls", "-q", "--filter", flt).split()
    if not ids:
        return []
    r = docker(kind, "inspect", *ids, check=False)
    if r.returncode == 0:
        inspect = json.loads(r.stdout)
    else:  # one went between the listing and here (another run's sweep): the rest, one by one
        inspect = []
        for i in ids:
            one = docker(kind, "inspect", i, check=False)
            if one.returncode == 0:
                inspect.extend(json.loads(one.stdout))
    out = []
    for obj in inspect:
        labels = (obj.get("Config") or {}).get("Labels") if kind == "container" \
            else obj.get("Labels")
        out.append((obj.get("Id") or obj.get("Name"), dict(labels or {})))
    return out


def remove_run(run_id: str | None = None, only_dead: bool = False,
               owner: str | None = None) -> dict[str, int]:
    """Remove the containers, networks and volumes of one run (or, with `only_dead`, of every
    run whose owning process is gone; with `owner`, of every run that process owns). Returns
    how many of each went. Harness containers go first: a harness stopped starts nothing
    more, and what it started meanwhile is listed after it."""
    def chosen(kind: str) -> list[tuple[str, dict[str, str]]]:
        return [(i, labels) for i, labels in labelled(kind, run_id)
                if (not only_dead or not owner_alive(labels.get(OWNER_LABEL, "")))
                and (owner is None or labels.get(OWNER_LABEL) == owner)]

    removed = {"container": 0, "network": 0, "volume": 0}
    harnesses = [i for i, labels in chosen("container")
                 if labels.get(ROLE_LABEL) == HARNESS_ROLE]
    if harnesses:
        _remove_containers(harnesses)
        removed["container"] += len(harnesses)
    for kind in ("container", "network", "volume"):
        ids = [i for i, _ in chosen(kind)]
        if not ids:
            continue
        if kind == "container":
            _remove_containers(ids)
        else:
            docker(kind, "rm", *ids, check=False, timeout_s=60)
        removed[kind] += len(ids)
    return removed


def _remove_containers(ids: Sequence[str]) -> None:
    paused = set(_out("ps", "-q", "--no-trunc", "--filter", "status=paused").split())
    for i in ids:  # a paused container must be thawed before it can be killed
        if i in paused:
            docker("unpause", i, check=False, timeout_s=20)
    docker("rm", "-f", "-v", *ids, check=False, timeout_s=120)


def remove_owned(owner: str) -> dict[str, int]:
    """Remove every container, network and volume owned by the process `owner` labels."""
    return remove_run(None, owner=owner)


def sweep_stale() -> dict[str, int]:
    """Remove what runs of processes that no longer exist left behind (killed with SIGKILL)."""
    return remove_run(None, only_dead=True)


# ---------------------------------------------------------------------------------------------
# network and compose file


def _used_networks() -> list[ipaddress.IPv4Network]:
    used: list[ipaddress.IPv4Network] = []
    for nid in _out("network", "ls", "-q").split():
        with contextlib.suppress(DockerError, ValueError, json.JSONDecodeError):
            for net in json.loads(_out("network", "inspect", nid)):
                for cfg in (net.get("IPAM") or {}).get("Config") or []:
                    if "Subnet" in cfg and ":" not in cfg["Subnet"]:
                        used.append(ipaddress.IPv4Network(cfg["Subnet"], strict=False))
    with contextlib.suppress(OSError):
        for line in Path("/proc/net/route").read_text().splitlines()[1:]:
            f = line.split()
            dest = ipaddress.IPv4Address(int(f[1], 16).to_bytes(4, "little"))
            mask = bin(int(f[7], 16)).count("1")
            if mask:
                used.append(ipaddress.IPv4Network(f"{dest}/{mask}", strict=False))
    return used


def _candidate_subnets(rng: random.Random) -> list[ipaddress.IPv4Network]:
    """/24s in 172.30.0.0/15 in random order (outside Docker's first default pools)."""
    cands = [ipaddress.IPv4Network(f"172.{a}.{b}.0/24") for a in (30, 31) for b in range(256)]
    rng.shuffle(cands)
    return cands


def create_network(name: str, labels: Mapping[str, str],
                   rng: random.Random | None = None) -> ipaddress.IPv4Network:
    rng = rng or random.Random()
    used = _used_networks()
    tries = 0
    for cand in _candidate_subnets(rng):
        if any(cand.overlaps(u) for u in used):
            continue
        tries += 1
        if tries > 10:
            break
        label_args = [a for k, v in labels.items() for a in ("--label", f"{k}={v}")]
        r = docker("network", "create", "--driver", "bridge", "--subnet", str(cand),
                   *label_args, name, check=False)
        if r.returncode == 0:
            return cand
    raise DockerError("could not create a private network: no free /24 in 172.30.0.0/15")


def host_address(subnet: ipaddress.IPv4Network, host: int) -> str:
    return str(subnet.network_address + host)


def pair_link(src: int, dst: int) -> str:
    """The proxy link that carries broker `src`'s connections to broker `dst`."""
    return f"n{src}-to-n{dst}"


def pair_port(src: int, dst: int) -> int:
    return PAIR_BASE_PORT + 100 * src + dst


_PLAIN = re.compile(r"[A-Za-z0-9_./:=-]+")


def _yaml_str(x: str) -> str:
    return x if _PLAIN.fullmatch(x) else json.dumps(x)


def recipe_values(recipe: Recipe, i: int) -> dict[str, str]:
    """The recipe placeholders of broker i, as compose variables (harness/runtime/recipe.py)."""
    return {"broker_id": str(i), "listen_host": f"${{HIWATER_NET}}.{BROKER_HOST0 + i}",
            "listen_port": str(BROKER_PORT), "advertised_host": f"${{HIWATER_NET}}.{PROXY_HOST}",
            "advertised_port": str(PROXY_BASE_PORT + i),
            "zookeeper_connect": f"${{HIWATER_NET}}.{ZK_HOST}:{ZK_PORT}",
            "data_dir": recipe.data_dir, "mount": recipe.mount}


def _fill(text: str, values: Mapping[str, str]) -> str:
    return text.replace("$", "$$").format(**values)  # a literal $ is $$ for compose


def render_compose(brokers: int, recipe: Recipe | None = None) -> str:
    """The compose file of a run with `brokers` brokers (as the recipe says: default
    docker/recipes/hiwater.toml). Values that differ between runs are variables the runtime
    passes in the environment: HIWATER_RUN (the run id), HIWATER_OWNER, HIWATER_IMAGE (ZooKeeper,
    the proxy and hiwater brokers), HIWATER_BROKER_IMAGE (a recipe's own image), HIWATER_NET
    (the network's first three octets), HIWATER_DIR (the host directory with a sub-directory
    per node)."""
    if not 1 <= brokers <= MAX_BROKERS:
        raise ValueError(f"brokers must be 1..{MAX_BROKERS}")
    recipe = recipe or hiwater_recipe()
    lines = [
        "# ZooKeeper, the Toxiproxy-API proxy and the brokers of one hiwater Docker run.",
        "# Written by harness/runtime/docker.py (render_compose); this is its 3-broker output.",
        "# The network is created by the runtime first (a free /24, labelled); by hand:",
        "#   docker network create --subnet 172.30.7.0/24 --label hiwater.run=manual "
        "hiwater-manual",
        "#   HIWATER_RUN=manual HIWATER_OWNER=- HIWATER_IMAGE=hiwater/node:latest "
        "HIWATER_NET=172.30.7 \\",
        "#   HIWATER_DIR=$PWD/store/docker-manual docker-compose -p hiwater-manual "
        "-f docker/compose.yaml up -d",
        "# (each node's /data needs its configuration first: the runtime writes it.)",
        'version: "2.4"',
        "x-node: &node",
        "  image: ${HIWATER_IMAGE}",
        "  cap_add: [NET_ADMIN]",
        "  restart: \"no\"",
        "  stop_grace_period: 30s",
        "  labels:",
        f"    {LABEL}: ${{HIWATER_RUN}}",
        f"    {OWNER_LABEL}: ${{HIWATER_OWNER}}",
        "networks:",
        "  hiwater:",
        "    external: true",
        "    name: hiwater-${HIWATER_RUN}",
        "services:",
    ]

    def service(name: str, command: Sequence[str], host: int, extra: Sequence[str] = (),
                mount: str = "/data", head: Sequence[str] = ()) -> None:
        lines.extend([
            f"  {name}:",
            "    <<: *node",
            *head,
            f"    container_name: hiwater-${{HIWATER_RUN}}-{name}",
            f"    hostname: {name}",
            f"    command: [{', '.join(_yaml_str(c) for c in command)}]",
            *extra,
            f"    volumes: [\"${{HIWATER_DIR}}/{name}:{mount}\"]",
            "    networks:",
            "      hiwater:",
            f"        ipv4_address: ${{HIWATER_NET}}.{host}",
        ])

    if recipe.zookeeper:
        service(ZOOKEEPER_NODE, ["zookeeper"], ZK_HOST, ["    mem_limit: 512m"])
    service("proxy", ["proxy"], PROXY_HOST)
    head = [] if recipe.builtin_image else ["    image: ${HIWATER_BROKER_IMAGE}"]
    for i in range(1, brokers + 1):
        values = recipe_values(recipe, i)
        env = [f"      {k}: {json.dumps(_fill(v, values))}"
               for k, v in sorted(recipe.environment.items())]
        service(node_name(i), [_fill(c, values) for c in recipe.command], BROKER_HOST0 + i,
                ["    environment:", *env] if env else [], recipe.mount, head)
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# the runtime


class _RemoteToxiproxy:
    """The proxy container's API, shaped as `ToxiproxyLinks` expects its server."""

    kind = "builtin (container)"

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port

    def stop(self) -> None:
        pass


_seq = 0
_seq_lock = threading.Lock()


def new_run_id() -> str:
    """`<pid>-<n>-<random>`; in a harness container, the harness's run id in place of the pid
    (which is 1 in every harness container)."""
    global _seq
    with _seq_lock:
        _seq += 1
        return f"{os.environ.get(HARNESS_RUN_ENV) or os.getpid()}-{_seq}-{secrets.token_hex(2)}"


class DockerRuntime(Runtime):
    zookeeper_node: str | None = ZOOKEEPER_NODE

    def __init__(
        self,
        base_dir: Path | str,
        brokers: int = 3,
        overrides: Mapping[str, str] | None = None,
        bugs: Iterable[str] = (),
        *,
        image: str | None = None,
        base_image: str | None = None,
        zk_tick_ms: int = 500,
        ready_timeout_s: float | None = None,
        pause_mode: str = "freeze",
        recipe: Recipe | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        if not 1 <= brokers <= MAX_BROKERS:
            raise ValueError(f"brokers must be 1..{MAX_BROKERS}")
        self.recipe = recipe or hiwater_recipe()
        if self.recipe.max_brokers is not None and brokers > self.recipe.max_brokers:
            raise ValueError(f"recipe {self.recipe.name} runs at most "
                             f"{self.recipe.max_brokers} broker(s), not {brokers}")
        self.zookeeper_node = ZOOKEEPER_NODE if self.recipe.zookeeper else None
        if pause_mode not in PAUSE_MODES:
            raise ValueError(f"pause mode must be one of {', '.join(PAUSE_MODES)}, "
                             f"not {pause_mode!r}")
        self.pause_mode = pause_mode
        self._sigstopped: set[str] = set()
        self.base_dir = Path(base_dir).resolve()
        self.brokers = brokers
        self.overrides = dict(overrides or {})
        self.bugs = tuple(bugs)
        if self.bugs:
            self.overrides["hiwater.bugs"] = ",".join(self.bugs)
        self.image = image
        self.base_image = base_image or default_base()
        self.zk_tick_ms = zk_tick_ms
        self.ready_timeout_s = (self.recipe.ready_timeout_s if ready_timeout_s is None
                                else ready_timeout_s)
        self.broker_image: str | None = None
        self.log = log or (lambda _m: None)
        self.run_id = new_run_id()
        self.project = f"hiwater-{self.run_id}"
        self.subnet: ipaddress.IPv4Network | None = None
        self.links: Any = None
        self.rules: dict[str, list[list[str]]] = {"proxy": [], ZOOKEEPER_NODE: []}
        self.timings: dict[str, float] = {}
        self._incarnation: dict[int, int] = {}  # broker id -> starts after the first
        self._cleanup_token: int | None = None
        self._lock = threading.RLock()
        self.started = False
        self.stopped = False

    # -- addresses -----------------------------------------------------------------------------

    def _addr(self, host: int) -> str:
        if self.subnet is None:
            raise NodeStateError("the runtime is not started")
        return host_address(self.subnet, host)

    def broker_address(self, i: int) -> str:
        return self._addr(BROKER_HOST0 + i)

    @property
    def zk_address(self) -> str:
        return self._addr(ZK_HOST)

    @property
    def proxy_address(self) -> str:
        return self._addr(PROXY_HOST)

    def container(self, node: str) -> str:
        return f"{self.project}-{node}"

    def node_dir(self, node: str) -> Path:
        return self.base_dir / node

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> DockerRuntime:
        with self._lock:
            if self.started:
                return self
            self.started = True
            t0 = time.monotonic()
            require_engine()
            # in a harness container /proc is the container's: whether another run's owner
            # lives cannot be told from here (the host command swept before starting it)
            if harness_container_name() is None:
                swept = sweep_stale()
                if any(swept.values()):
                    self.log(f"removed what dead runs left: {swept}")
            if self.image is None:  # in a harness container: the host built it
                self.image = (os.environ.get(NODE_IMAGE_ENV)
                              or build_images(self.base_image, log=self.log))
            self.broker_image = self._recipe_image()
            self.timings["images_s"] = round(time.monotonic() - t0, 3)
            self._cleanup_token = cleanup.register(self.stop)
            try:
                self._start_cluster()
            except BaseException:
                # the containers' logs say why; stop() removes them, collect_logs copies these
                with contextlib.suppress(Exception):
                    self.collect_logs(self.base_dir / "start-failure-logs")
                self.stop()
                raise
            self.timings["start_s"] = round(time.monotonic() - t0, 3)
        return self

    def _recipe_image(self) -> str:
        """The brokers' image: the node image, or the recipe's (which must be here: no
        registry is assumed)."""
        assert self.image is not None
        if self.recipe.builtin_image:
            return self.image
        if not image_exists(self.recipe.image):
            raise DockerError(f"recipe {self.recipe.name}: image {self.recipe.image} is not on "
                              "this machine (docker pull or docker load it first)")
        return self.recipe.image

    def _env(self) -> dict[str, str]:
        assert self.subnet is not None and self.image is not None
        prefix = str(self.subnet.network_address).rsplit(".", 1)[0]
        return dict(os.environ, HIWATER_RUN=self.run_id, HIWATER_OWNER=owner_label(),
                    HIWATER_IMAGE=self.image, HIWATER_BROKER_IMAGE=self.broker_image or "",
                    HIWATER_NET=prefix, HIWATER_DIR=str(self.base_dir))

    def compose(self, *args: str, timeout_s: float = 120.0) -> None:
        cmd = ["docker-compose", "-p", self.project, "-f", str(self.base_dir / "compose.yaml"),
               *args]
        try:
            r = subprocess.run(cmd, env=self._env(), capture_output=True, timeout=timeout_s,
                               check=False)
        except FileNotFoundError:
            raise DockerUnavailable("docker-compose is not installed (Debian package "
                                    "docker-compose)") from None
        except subprocess.TimeoutExpired:
            raise DockerError(f"docker-compose {' '.join(args)} timed out") from None
        if r.returncode != 0:
            tail = r.stderr.decode(errors="replace").strip().splitlines()[-3:]
            raise DockerError(f"docker-compose {' '.join(args)}: {' | '.join(tail)}")

    def _start_cluster(self) -> None:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.subnet = create_network(self.project, {LABEL: self.run_id,
                                                    OWNER_LABEL: owner_label()})
        if (me := harness_container_name()) is not None:  # the harness reaches the nodes directly
            docker("network", "connect", self.project, me)
        (self.base_dir / "compose.yaml").write_text(render_compose(self.brokers, self.recipe))
        if self.recipe.zookeeper:
            zk_dir = self.node_dir(ZOOKEEPER_NODE)
            zk_dir.mkdir(parents=True, exist_ok=True)
            (zk_dir / "zoo.cfg").write_text("\n".join([
                f"tickTime={self.zk_tick_ms}", f"minSessionTimeout={2 * self.zk_tick_ms}",
                f"maxSessionTimeout={20 * self.zk_tick_ms}", "dataDir=/data/zk",
                f"clientPort={ZK_PORT}", "maxClientCnxns=200", "admin.enableServer=false",
                "4lw.commands.whitelist=ruok,stat,mntr,srvr,cons", ""]))
        self.node_dir("proxy").mkdir(parents=True, exist_ok=True)
        for i in range(1, self.brokers + 1):
            self._write_config(i)
        t0 = time.monotonic()

        def phase(name: str) -> None:  # seconds of each step, in runtime.json (timings)
            self.timings[f"{name}_s"] = round(time.monotonic() - t0, 3)

        if self.recipe.zookeeper:
            self.compose("up", "-d", "--no-build", ZOOKEEPER_NODE, "proxy")
            phase("zookeeper_proxy_up")
            self._wait_zookeeper()
            phase("zookeeper_ready")
        else:
            self.compose("up", "-d", "--no-build", "proxy")
            phase("proxy_up")
        self._setup_proxies()
        phase("proxy_links")
        self.compose("up", "-d", "--no-build", *self.nodes)
        phase("brokers_up")
        self.wait_ready(every=True)
        phase("brokers_ready")

    def _write_config(self, i: int) -> None:
        d = self.node_dir(node_name(i))
        d.mkdir(parents=True, exist_ok=True)
        d.chmod(0o777)  # a recipe's image may run its broker as another user
        if self.recipe.config_file is None:
            return
        rf = str(min(3, self.brokers))
        props = {
            "broker.id": str(i),
            "listeners": f"PLAINTEXT://{self.broker_address(i)}:{BROKER_PORT}",
            "advertised.listeners": f"PLAINTEXT://{self.proxy_address}:{PROXY_BASE_PORT + i}",
            "log.dirs": self.recipe.data_dir,
            "zookeeper.connect": f"{self.zk_address}:{ZK_PORT}",
            "zookeeper.session.timeout.ms": "6000",
            "default.replication.factor": rf,
            "offsets.topic.replication.factor": rf,
            "offsets.topic.num.partitions": "10",
            "group.initial.rebalance.delay.ms": "500",
            "hiwater.admin.port": str(self.recipe.admin_port or ADMIN_PORT),
            **self.overrides,
            **self.recipe.properties,
        }
        path = self.recipe.host_path(d, self.recipe.config_file)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def _wait_zookeeper(self, timeout_s: float = 60.0) -> None:
        from broker.runtime.zkserver import four_letter_word

        deadline = time.monotonic() + timeout_s
        last = ""
        while time.monotonic() < deadline:
            try:
                if "Mode: standalone" in four_letter_word(self.zk_address, ZK_PORT, "srvr"):
                    return
            except OSError as e:
                last = str(e)
            if not self.is_running(ZOOKEEPER_NODE):
                raise DockerError(f"ZooKeeper exited: {self._logs_tail(ZOOKEEPER_NODE)}")
            time.sleep(0.2)
        raise DockerError(f"ZooKeeper not ready after {timeout_s:.0f} s: {last}")

    def _setup_proxies(self, timeout_s: float = 60.0) -> None:
        from harness.runtime.proxies import ToxiproxyLinks

        host = self.proxy_address
        for var in ("NO_PROXY", "no_proxy"):  # toxiproxy-python's requests: never via a proxy
            have = [h for h in os.environ.get(var, "").split(",") if h]
            if host not in have:
                os.environ[var] = ",".join([*have, host])
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with urllib.request.urlopen(f"http://{host}:{TOXIPROXY_API_PORT}/version",
                                            timeout=1.0):
                    break
            except OSError as e:
                if time.monotonic() > deadline or not self.is_running("proxy"):
                    raise DockerError(f"the proxy's API did not answer: {e}; "
                                      f"{self._logs_tail('proxy')}") from None
                time.sleep(0.2)
        links = ToxiproxyLinks()
        links.server = _RemoteToxiproxy(host, TOXIPROXY_API_PORT)  # type: ignore[assignment]
        for i in range(1, self.brokers + 1):
            links.add_proxy(node_name(i), ("0.0.0.0", PROXY_BASE_PORT + i),
                            (self.broker_address(i), BROKER_PORT))
        if self.pair_links:
            redirects = []
            for s, d in self._pairs():
                links.add_proxy(pair_link(s, d), ("0.0.0.0", pair_port(s, d)),
                                (self.broker_address(d), BROKER_PORT))
                redirects.append(
                    f"-A PREROUTING -s {self.broker_address(s)} -p tcp --dport "
                    f"{PROXY_BASE_PORT + d} -j REDIRECT --to-ports {pair_port(s, d)}")
            body = ["*nat", *redirects, "COMMIT", ""]
            docker("exec", "-i", self.container("proxy"), "iptables-restore", "-w", "5",
                   "--noflush", input="\n".join(body).encode())
        self.links = links

    @property
    def pair_links(self) -> bool:
        return self.brokers <= PAIR_LINKS_MAX_BROKERS

    def _pairs(self) -> list[tuple[int, int]]:
        ids = range(1, self.brokers + 1)
        return [(s, d) for s in ids for d in ids if s != d]

    def stop(self) -> None:
        """Remove every container, the network and any volume of the run. Idempotent."""
        with self._lock:
            if self.stopped or not self.started:
                self.stopped = True
                return
            self.stopped = True
            try:
                if (me := harness_container_name()) is not None and self.subnet is not None:
                    # a network with an endpoint cannot be removed
                    docker("network", "disconnect", "-f", self.project, me, check=False)
                remove_run(self.run_id)
            finally:
                if self._cleanup_token is not None:
                    cleanup.unregister(self._cleanup_token)

    # -- views -----------------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.proxy_address}:{PROXY_BASE_PORT + i}"
                        for i in range(1, self.brokers + 1))

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(node_name(i) for i in range(1, self.brokers + 1))

    def _id(self, node: str) -> int:
        i = node_id(node)
        if not 1 <= i <= self.brokers:
            raise ValueError(f"no node {node!r} (nodes: {', '.join(self.nodes)})")
        return i

    def capabilities(self) -> dict[str, str | None]:
        no_zk = None if self.recipe.zookeeper else \
            f"recipe {self.recipe.name}: the brokers use no ZooKeeper of the runtime"
        return {"kill": None, "start": None, "stop": None, "pause": None, "resume": None,
                "wipe": None, "lose-unflushed": None, "corrupt": None, "partition": None,
                "isolate-from-zookeeper": no_zk, "toxic": None}

    def _state(self, node: str) -> tuple[bool, bool]:
        r = docker("inspect", "--format", "{{.State.Running}} {{.State.Paused}}",
                   self.container(node), check=False, timeout_s=20)
        if r.returncode != 0:
            return False, False
        running, paused = r.stdout.decode().split()
        return running == "true", paused == "true"

    def is_running(self, node: str) -> bool:
        return self._state(node)[0]

    def is_paused(self, node: str) -> bool:
        running, paused = self._state(node)
        return running and (paused or node in self._sigstopped)

    def replica_states(self, node: str, timeout_s: float = 2.0) -> BrokerState:
        """The broker's `/replicas`. Its "pid" is the broker's PID inside the container, the
        same (1) in every incarnation; the live probe tells processes apart by it, so it is
        replaced by one unique per start of the container (the original is `container_pid`)."""
        i = self._id(node)
        if self.recipe.admin_port is None:
            raise FaultUnsupported("replica-states", f"recipe {self.recipe.name} has no "
                                   "admin_port")
        url = f"http://{self.broker_address(i)}:{self.recipe.admin_port}/replicas"
        with urllib.request.urlopen(url, timeout=timeout_s) as r:
            data: dict[str, Any] = json.loads(r.read())
        data["container_pid"] = data.get("pid")
        data["pid"] = self._incarnation.get(i, 0) * 1_000_000 + int(data.get("pid") or 0)
        return cast(BrokerState, data)

    def _reachable_states(self, timeout_s: float = 1.0) -> list[BrokerState]:
        # every node is asked: is_running/is_paused would cost a `docker inspect` each
        out = []
        for n in self.nodes:
            with contextlib.suppress(Exception):
                out.append(self.replica_states(n, timeout_s))
        return out

    def wait_ready(self, timeout_s: float | None = None, every: bool = False) -> None:
        """Until every running broker (`every`: every broker) answers Metadata (through its
        proxy) listing every running broker, with a controller."""
        from broker.runtime.cluster import ClusterError, probe_metadata

        timeout_s = self.ready_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        last = ""
        while time.monotonic() < deadline:
            want = [i for i in range(1, self.brokers + 1) if self.is_running(node_name(i))]
            if every and len(want) < self.brokers:
                break  # a broker exited during start-up
            if self.recipe.ready_kind == "command":
                codes = [docker("exec", self.container(node_name(i)),
                                *self._ready_command(i), check=False,
                                timeout_s=20).returncode for i in want]
                if want and not any(codes):
                    return
                last = f"running {want}, ready command exit codes {codes}"
                time.sleep(0.5)
                continue
            try:
                seen = [probe_metadata(self.proxy_address, PROXY_BASE_PORT + i, 1.0)
                        for i in want]
                if want and all(set(want) <= set(m["brokers"]) and m["controller_id"] >= 0
                                for m in seen):
                    return
                last = f"running {want}, metadata {seen}"
            except (OSError, ClusterError) as e:
                last = str(e)
            time.sleep(0.2)
        tails = "; ".join(f"{n}: {self._logs_tail(n, 3)}" for n in self.nodes
                          if not self.is_running(n))
        waited = timeout_s - max(0.0, deadline - time.monotonic())
        raise DockerError(f"cluster not ready after {waited:.0f} s"
                          + (f": {last}" if last else "")
                          + (f"; exited: {tails}" if tails else ""))

    def _ready_command(self, i: int) -> list[str]:
        """The recipe's ready.command for broker i, its placeholders filled with addresses."""
        values = {k: v.replace("${HIWATER_NET}", self._addr(0).rsplit(".", 1)[0])
                  for k, v in recipe_values(self.recipe, i).items()}
        return [c.format(**values) for c in self.recipe.ready_command]

    def _logs_tail(self, node: str, lines: int = 10) -> str:
        r = docker("logs", "--tail", str(lines), self.container(node), check=False)
        return (r.stdout + r.stderr).decode(errors="replace").strip().replace("\n", " | ")

    def collect_logs(self, run_dir: Path) -> list[Path]:
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        written: list[Path] = []
        early = self.base_dir / "start-failure-logs"
        if self.stopped and early.is_dir() and early != run_dir:
            for src in sorted(early.glob("*.log")):  # what a failed start left
                shutil.copyfile(src, run_dir / src.name)
                written.append(run_dir / src.name)
        zk = (ZOOKEEPER_NODE,) if self.recipe.zookeeper else ()
        for node in (*zk, "proxy", *self.nodes):
            path = run_dir / ("zookeeper.log" if node == ZOOKEEPER_NODE else f"{node}.log")
            tmp = path.with_name(path.name + ".tmp")
            with open(tmp, "wb") as out:
                r = subprocess.run([*_docker_cmd(), "logs", "-t", self.container(node)],
                                   stdout=out, stderr=subprocess.STDOUT, timeout=60,
                                   check=False)
            if r.returncode == 0:
                os.replace(tmp, path)
                written.append(path)
            else:  # no such container (removed after a failed start: its copy above stays)
                tmp.unlink(missing_ok=True)
        for i in range(1, self.brokers + 1):
            cfg = self.recipe.config_file
            conf = self.recipe.host_path(self.node_dir(node_name(i)), cfg) if cfg else None
            if conf is not None and conf.exists():
                dst = run_dir / f"{node_name(i)}.server.properties"
                shutil.copyfile(conf, dst)
                written.append(dst)
        info = {
            "runtime": "docker", "run_id": self.run_id, "project": self.project,
            "image": self.image, "subnet": str(self.subnet), "nodes": list(self.nodes),
            "pause_mode": self.pause_mode, "pair_links": self.pair_links,
            "harness_container": harness_container_name(),
            "recipe": {"name": self.recipe.name, "path": str(self.recipe.path),
                       "broker_image": self.broker_image},
            "bootstrap": self.bootstrap if self.subnet else None,
            "addresses": {**{n: self.broker_address(self._id(n)) for n in self.nodes},
                          ZOOKEEPER_NODE: self.zk_address, "proxy": self.proxy_address}
            if self.subnet else {},
            "network": {"rules": self.rules}, "timings": self.timings,
        }
        (run_dir / "runtime.json").write_text(json.dumps(info, indent=2))
        written.append(run_dir / "runtime.json")
        return written

    # -- process faults ------------------------------------------------------------------------

    def kill(self, node: str) -> FaultReport:
        self._id(node)
        with self._lock:
            running, paused = self._state(node)
            if not running:
                return {"node": node, "result": "already-down"}
            docker("kill", "-s", "KILL", self.container(node), check=False)
            self._sigstopped.discard(node)
            if paused:  # a frozen task dies when thawed
                docker("unpause", self.container(node), check=False)
            self._wait_state(node, running=False)
        return {"node": node, "result": "killed"}

    def _wait_state(self, node: str, running: bool, timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while self.is_running(node) != running and time.monotonic() < deadline:
            time.sleep(0.05)

    def start_node(self, node: str, wait: bool = False) -> FaultReport:
        i = self._id(node)
        if not self.is_running(node) and self.recipe.zookeeper:
            self._await_unregistered(i)
        with self._lock:
            if self.is_running(node):
                return {"node": node, "result": "already-running"}
            self._incarnation[i] = self._incarnation.get(i, 0) + 1
            docker("start", self.container(node))
        if wait:
            self.wait_ready()
        return {"node": node, "result": "started"}

    def _await_unregistered(self, broker_id: int) -> None:
        """Until ZooKeeper no longer holds `/brokers/ids/<id>` (as LocalRuntime); bounded."""
        from kazoo.client import KazooClient

        deadline = time.monotonic() + 20 * self.zk_tick_ms / 1000.0 + 3.0
        kz = KazooClient(hosts=f"{self.zk_address}:{ZK_PORT}", timeout=2.0)
        try:
            kz.start(timeout=5.0)
            while (kz.exists(f"/brokers/ids/{broker_id}") is not None
                   and time.monotonic() < deadline):
                time.sleep(0.1)
        except Exception:
            pass
        finally:
            with contextlib.suppress(Exception):
                kz.stop()
                kz.close()

    def stop_node(self, node: str, timeout_s: float = 30.0) -> FaultReport:
        self._id(node)
        with self._lock:
            running, paused = self._state(node)
            if not running:
                return {"node": node, "result": "already-down"}
            if paused:
                docker("unpause", self.container(node), check=False)
            if node in self._sigstopped:  # SIGTERM waits for SIGCONT
                docker("kill", "-s", "CONT", self.container(node), check=False)
                self._sigstopped.discard(node)
            t0 = time.monotonic()
            docker("stop", "-t", str(int(timeout_s)), self.container(node),
                   timeout_s=timeout_s + 30)
        return {"node": node, "result": "stopped", "seconds": round(time.monotonic() - t0, 3)}

    def pause(self, node: str) -> FaultReport:
        self._id(node)
        running, paused = self._state(node)
        if not running:
            return {"node": node, "result": "down"}
        if self.pause_mode == "sigstop":
            if node not in self._sigstopped:
                docker("kill", "-s", "STOP", self.container(node))
                self._sigstopped.add(node)
            return {"node": node, "result": "paused", "signal": "SIGSTOP"}
        if not paused:
            docker("pause", self.container(node), check=False)
        return {"node": node, "result": "paused"}

    def resume(self, node: str) -> FaultReport:
        self._id(node)
        running, paused = self._state(node)
        if not running:
            self._sigstopped.discard(node)
            return {"node": node, "result": "down"}
        if node in self._sigstopped:
            docker("kill", "-s", "CONT", self.container(node), check=False)
            self._sigstopped.discard(node)
            return {"node": node, "result": "resumed", "signal": "SIGCONT"}
        if paused:
            docker("unpause", self.container(node), check=False)
        return {"node": node, "result": "resumed" if paused else "not-paused"}

    def broker_process_state(self, node: str) -> str | None:
        """The broker process's state letter in /proc (`T` when stopped), seen from the
        host: None when the container is not running."""
        r = docker("inspect", "--format", "{{.State.Pid}}", self.container(node),
                   check=False, timeout_s=20)
        pid = r.stdout.decode().strip() if r.returncode == 0 else ""
        if not pid.isdigit() or pid == "0":
            return None
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return None

    # -- disk faults (on the bind mount) -------------------------------------------------------

    def data_dirs(self, node: str) -> list[Path]:
        return [self.recipe.host_path(self.node_dir(node), self.recipe.data_dir)]

    def _require_down(self, node: str, fault: str) -> None:
        if self.is_running(node):
            raise NodeStateError(f"{fault} needs {node} down (kill or stop it first)")

    def wipe(self, node: str) -> FaultReport:
        from harness.runtime import disk

        self._require_down(node, "wipe")
        out: dict[str, Any] = {"node": node, "files": 0, "bytes": 0}
        for d in self.data_dirs(node):
            r = disk.wipe_data_dir(d)
            out["files"] += r["files"]
            out["bytes"] += r["bytes"]
        return out

    def lose_unflushed(self, node: str) -> FaultReport:
        from harness.runtime import disk

        self._require_down(node, "lose-unflushed")
        lost: dict[str, Any] = {}
        for d in self.data_dirs(node):
            lost.update(disk.lose_unflushed_in(d))
        return {"node": node, "lost": lost}

    def corrupt_segment(self, node: str, seed: int = 0, kind: str = "header",
                        topic: str | None = None) -> FaultReport:
        from harness.runtime import disk

        rng = random.Random(seed)
        dirs = self.data_dirs(node)
        out = disk.corrupt_segment_in(dirs[rng.randrange(len(dirs))], rng, kind, topic)
        out["node"] = node
        out["node_running"] = self.is_running(node)
        return out

    # -- network faults ------------------------------------------------------------------------

    def partition_rules(self, grudge: Grudge) -> dict[str, list[list[str]]]:
        """Per container (`proxy`, `zk`), the iptables rules that carry out `grudge`."""
        g = normalize_grudge(grudge, (*self.nodes, ZOOKEEPER_NODE))
        rules: dict[str, list[list[str]]] = {"proxy": [], ZOOKEEPER_NODE: []}
        for dst, srcs in g.items():
            for src in srcs:
                if dst == ZOOKEEPER_NODE:  # ZooKeeper ignores the broker
                    rules[ZOOKEEPER_NODE].append(
                        ["-A", "INPUT", "-s", self.broker_address(self._id(src)), "-j", "DROP"])
                elif src == ZOOKEEPER_NODE:  # the broker ignores ZooKeeper
                    rules[ZOOKEEPER_NODE].append(
                        ["-A", "OUTPUT", "-d", self.broker_address(self._id(dst)), "-j", "DROP"])
                else:
                    s, d = self._id(src), self._id(dst)
                    # by the original destination port: the per-pair redirect moved it
                    rules["proxy"].append(
                        ["-A", "INPUT", "-s", self.broker_address(s), "-p", "tcp",
                         "-m", "conntrack", "--ctorigdstport", str(PROXY_BASE_PORT + d),
                         "-j", "DROP"])
                    rules["proxy"].append(
                        ["-A", "OUTPUT", "-d", self.broker_address(d), "-p", "tcp",
                         "-m", "conntrack", "--ctorigdstport", str(PROXY_BASE_PORT + s),
                         "-j", "DROP"])
        return rules

    def _iptables_restore(self, node: str, rules: Sequence[Sequence[str]],
                          flush: bool = False) -> None:
        body = ["*filter"]
        if flush:
            body += [":INPUT ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]", "-F INPUT", "-F OUTPUT"]
        body += [" ".join(r) for r in rules] + ["COMMIT", ""]
        args = ["exec", "-i", self.container(node), "iptables-restore", "-w", "5"]
        if not flush:
            args.append("--noflush")
        docker(*args, input="\n".join(body).encode())

    def partition(self, grudge: Grudge) -> FaultReport:
        g = normalize_grudge(grudge, (*self.nodes, ZOOKEEPER_NODE))
        per = self.partition_rules(g)
        added = 0
        with self._lock:
            for c, rules in per.items():
                new = [r for r in rules if r not in self.rules[c]]
                if new:
                    self._iptables_restore(c, new)
                    self.rules[c].extend(new)
                    added += len(new)
        return {"isolated": {k: list(v) for k, v in g.items()}, "rules": added}

    def heal(self) -> FaultReport:
        with self._lock:
            healed = sum(len(r) for r in self.rules.values())
            for c in self.rules:
                if c == ZOOKEEPER_NODE and not self.recipe.zookeeper:
                    continue
                self._iptables_restore(c, [], flush=True)
                self.rules[c] = []
        return {"healed": healed}

    def add_toxic(self, node: str, toxic_type: str, attributes: Mapping[str, object], *,
                  stream: str = "downstream", toxicity: float = 1.0,
                  source: str | None = None) -> FaultReport:
        """A toxic on the link into `node`: every connection into it, or with `source` only
        the connections from broker `source` (its own link; downstream: what `node` sends to
        `source`)."""
        if self.links is None:
            raise FaultUnsupported("toxic", "the proxy is not running")
        d = self._id(node)
        link = node
        if source is not None:
            s = self._id(source)
            if s == d:
                raise ValueError(f"a toxic between {node} and itself")
            if not self.pair_links:
                raise FaultUnsupported("toxic", f"per-pair links exist for up to "
                                       f"{PAIR_LINKS_MAX_BROKERS} brokers")
            link = pair_link(s, d)
        name = self.links.add_toxic(link, toxic_type, attributes, stream=stream,
                                    toxicity=toxicity)
        out = {"node": node, "toxic": name, "type": toxic_type, "stream": stream,
               "attributes": dict(attributes), "toxicity": toxicity}
        if source is not None:
            out.update(source=source, link=link)
        return out

    def remove_toxics(self, node: str | None = None) -> FaultReport:
        """Remove the toxics of every link (`node`: of the links into it, pairs included)."""
        if self.links is None:
            return {"removed": {}}
        if node is None:
            return {"removed": self.links.remove_toxics(None)}
        d = self._id(node)
        removed: dict[str, list[str]] = {}
        for link in [node, *(pair_link(s, d) for s, dd in self._pairs()
                             if dd == d and self.pair_links)]:
            removed.update(self.links.remove_toxics(link))
        return {"removed": removed}

