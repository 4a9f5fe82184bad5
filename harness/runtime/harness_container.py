"""The harness in a container: `hiwater campaign --runtime docker --harness container`.

The host command builds the images, sweeps what dead runs left, and starts one container of
the harness image (`hiwater/harness:src-<hash>`, docker/harness/Dockerfile: the node image
plus the harness's dependencies, the Docker client and the whole source) that runs the same
`hiwater campaign` (workload clients, nemesis, checkers, report) with the options the user
gave. Its exit code is the host command's.

Inside, the campaign's `DockerRuntime` creates the run's private network and attaches the
harness container to it (`docker network connect`), so every client connection, probe and
proxy-API call goes to the containers' private addresses from a container on that network:
the host needs no route to it (Docker Desktop, rootless Docker, a runner that only has
Docker). The nemesis drives the engine from inside, through the engine's socket bind-mounted
into the harness container; the alternative, the nemesis on the host and the rest inside,
would have needed a remote-procedure layer for every fault and the host to reach the proxy's
API and the brokers' admin ports on the private network again, the very thing this mode
spares it. The socket is root on the engine's host: this mode trusts the harness image as
the host mode trusts the harness process.

Paths: the store directory is bind-mounted at the same absolute path, so the run directory
(history.jsonl, results.json, report.html, logs/) lands on the host exactly where the host
mode writes it, and the nodes' bind mounts, which the runtime inside names by that path, mean
the same directories to the engine; the `--junit` file's directory likewise, the `--recipe`
file's read-only.

Ownership: the harness container and everything its campaign starts carry the host process's
owner label (`hiwater.pid=<pid>:<start time>`, passed in as HIWATER_HARNESS_OWNER), so the host
command removes all of it at its end (also on errors, Ctrl-C and SIGTERM: the campaign inside
gets SIGINT and cleans up itself first, then whatever is left is removed), and after a SIGKILL
of the host command the next run's sweep removes the harness container first (`remove_run`),
then its cluster. The runtime inside does not sweep: it cannot see the host's processes.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from harness.runtime import cleanup
from harness.runtime import docker as hd

HARNESS_REPO = "hiwater/harness"
HARNESS_DOCKERFILE = "docker/harness/Dockerfile"
# the whole harness: what the campaign imports (core, broker for the cluster helpers, spec for
# the checkers' policies, nemesis for schedules and faults) and the node recipes it reads
HARNESS_SOURCE_DIRS = ("core", "spec", "broker", "harness", "nemesis", "docker/recipes")
# after SIGINT, how long the campaign inside has to stop its cluster and write its results
STOP_GRACE_S = 120.0
# what `hiwater campaign` exits with: 0 valid, 1 invalid, 2 unknown, 3 error, 130 interrupted
CAMPAIGN_CODES = (0, 1, 2, 3, 130)
EXIT_ERROR = 3


def harness_context(root: Path = hd.REPO) -> tuple[bytes, str]:
    """The harness image's build context (as `docker.build_context`): the Dockerfile, the
    locked dependencies and src/ with the whole source."""
    files: list[tuple[str, Path]] = [(f, root / f) for f in ("pyproject.toml", "uv.lock")]
    files.append((HARNESS_DOCKERFILE, root / HARNESS_DOCKERFILE))
    for d in HARNESS_SOURCE_DIRS:
        for p in sorted((root / d).rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".pyc"):
                files.append((f"src/{p.relative_to(root).as_posix()}", p))
    return hd.pack_context(files)


def build_harness_image(node_image: str, force: bool = False,
                        log: Callable[[str], None] = print, root: Path = hd.REPO) -> str:
    """Make sure the harness image of this tree on `node_image` exists (Docker's cache: only
    the source layer rebuilds after an edit) and return `hiwater/harness:src-<hash>`."""
    context, digest = harness_context(root)
    node_id = hd.docker("image", "inspect", "--format", "{{.Id}}", node_image,
                        timeout_s=30).stdout.decode().strip()
    tag = hashlib.sha256(f"{digest}\0{node_id}".encode()).hexdigest()[:16]
    ref = f"{HARNESS_REPO}:src-{tag}"
    with hd.build_lock():
        if not force and hd.image_exists(ref):
            return ref
        log(f"building {ref} from {HARNESS_DOCKERFILE} (FROM {node_image})")
        t0 = time.monotonic()
        args = ["build", "--network", "host", "--force-rm", "-f", HARNESS_DOCKERFILE,
                "--build-arg", f"NODE={node_image}", "-t", ref, "-t", f"{HARNESS_REPO}:latest"]
        if force:
            args.append("--no-cache")
        r = hd.docker(*args, "-", input=context, timeout_s=hd.BUILD_TIMEOUT_S, check=False)
        if r.returncode != 0:
            tail = (r.stdout + r.stderr).decode(errors="replace").strip().splitlines()[-15:]
            raise hd.DockerError("docker build of the harness image failed:\n"
                                 + "\n".join(tail))
        log(f"built {ref} in {time.monotonic() - t0:.1f} s")
        hd.prune_tags(HARNESS_REPO, ref)
    return ref


def engine_args() -> list[str]:
    """How the harness container reaches the engine: its unix socket bind-mounted (the
    default one, or DOCKER_HOST's), or DOCKER_HOST passed on when it is not a socket."""
    host = os.environ.get("DOCKER_HOST", "")
    if host and not host.startswith("unix://"):
        return ["-e", f"DOCKER_HOST={host}"]
    sock = host.removeprefix("unix://") or "/var/run/docker.sock"
    if not Path(sock).exists():
        raise hd.DockerUnavailable(f"--harness container: no engine socket at {sock}")
    return ["-v", f"{sock}:/var/run/docker.sock"]


def mount_args(rw: Sequence[Path], ro: Sequence[Path]) -> list[str]:
    """Bind mounts at the same absolute paths inside (directories made first)."""
    out: list[str] = []
    for p in rw:
        p.mkdir(parents=True, exist_ok=True)
        out += ["-v", f"{p}:{p}"]
    for p in ro:
        out += ["-v", f"{p}:{p}:ro"]
    return out


def localtime_args() -> list[str]:
    """The host's time zone, so that run directories are named by the same clock."""
    return ["-v", "/etc/localtime:/etc/localtime:ro"] if Path("/etc/localtime").exists() else []


def container_name(run_id: str) -> str:
    return f"hiwater-{run_id}-harness"


def run_in_container(campaign_args: Sequence[str], rw: Sequence[Path], ro: Sequence[Path] = (),
                     log: Callable[[str], None] = print) -> int:
    """Run `hiwater campaign CAMPAIGN_ARGS` in a harness container; its exit code.

    Everything started for it (the container, the cluster its campaign starts) is removed
    before this returns, whatever happened: its exit, an error here, Ctrl-C, SIGTERM."""
    hd.require_engine()
    engine = engine_args()
    swept = hd.sweep_stale()
    if any(swept.values()):
        log(f"removed what dead runs left: {swept}")
    node = hd.build_images(log=log)
    image = build_harness_image(node, log=log)
    run_id = hd.new_run_id()
    name = container_name(run_id)
    owner = hd.owner_label()
    cmd = ["docker", "run", "--name", name,
           "--label", f"{hd.LABEL}={run_id}", "--label", f"{hd.OWNER_LABEL}={owner}",
           "--label", f"{hd.ROLE_LABEL}={hd.HARNESS_ROLE}",
           "-e", f"{hd.HARNESS_OWNER_ENV}={owner}", "-e", f"{hd.HARNESS_CONTAINER_ENV}={name}",
           "-e", f"{hd.HARNESS_RUN_ENV}={run_id}",
           "-e", f"{hd.NODE_IMAGE_ENV}={node}", *engine, *mount_args(rw, ro),
           *localtime_args(), "-w", "/opt/hiwater", image, "campaign", *campaign_args]
    # its own session: a Ctrl-C on the terminal reaches this process alone, which passes one
    # SIGINT on to the campaign (the docker client would pass on every signal it gets)
    proc = subprocess.Popen(cmd, start_new_session=True)

    def stop() -> None:  # SIGTERM/SIGHUP or interpreter exit while the container runs
        _interrupt(name, proc)
        hd.remove_owned(owner)

    token = cleanup.register(stop)
    try:
        try:
            code = proc.wait()
        except KeyboardInterrupt:  # the campaign's own code after it stopped (3: interrupted)
            stopped = _interrupt(name, proc)
            code = 130 if stopped is None else stopped
        if code not in CAMPAIGN_CODES:  # docker run's own failure (125-127), or killed (137)
            log(f"hiwater campaign: the harness container failed (docker run exit {code})")
            return EXIT_ERROR
        return code
    finally:
        try:
            hd.docker("rm", "-f", name, check=False, timeout_s=60)  # ended: kept for its code
            left = hd.remove_owned(owner)
            if any(left.values()):
                log(f"removed what the harness container left: {left}")
        finally:
            cleanup.unregister(token)


def _interrupt(name: str, proc: subprocess.Popen[bytes]) -> int | None:
    """SIGINT to the campaign in the container (as a Ctrl-C: it stops its cluster and writes
    its results), up to STOP_GRACE_S for it to end (else the container is removed); its exit
    code. Waits with `docker wait`, not on `proc`: this runs in a signal handler too, which
    may have interrupted `proc.wait()` holding the Popen's wait lock (a second wait there
    spun until its timeout)."""
    if proc.returncode is not None:
        return proc.returncode
    print("hiwater campaign: interrupted; the harness container stops its run", file=sys.stderr)
    hd.docker("kill", "-s", "INT", name, check=False, timeout_s=20)
    try:
        out = hd.docker("wait", name, check=False, timeout_s=STOP_GRACE_S).stdout.decode()
    except hd.DockerError:  # not ended in time
        out = ""
    if not out.strip().isdigit():
        hd.docker("rm", "-f", name, check=False, timeout_s=60)
        return None
    return int(out.strip())


# ---------------------------------------------------------------------------------------------
# the launcher: `python3 -m harness.runtime.harness_container`, the standard library alone (a
# CI runner with Docker and its python3, no project environment)

USAGE = """usage: python3 -m harness.runtime.harness_container build
       python3 -m harness.runtime.harness_container campaign [OPTIONS of hiwater campaign]

build: the node and harness images (as `hiwater docker build --harness`).
campaign: `hiwater campaign --runtime docker --harness container OPTIONS`; the options are
checked by the campaign in the container (bad input: exit 3)."""
PATH_OPTIONS = ("--store", "--junit", "--recipe")


def launcher_args(argv: Sequence[str], cwd: Path) -> tuple[list[str], list[Path], list[Path]]:
    """The campaign's options with --store, --junit and --recipe made absolute (--store
    added: default store/), and the directories to bind-mount (read-write, read-only)."""
    args: list[str] = []
    paths: dict[str, Path] = {"--store": cwd / "store"}
    it = iter(argv)
    for a in it:
        opt, eq, value = a.partition("=")
        if opt in ("--harness", "--runtime"):
            v = value if eq else next(it, "")
            if v != {"--harness": "container", "--runtime": "docker"}[opt]:
                raise ValueError(f"{opt} {v}: this launcher runs --runtime docker "
                                 "--harness container")
        elif opt in PATH_OPTIONS:
            paths[opt] = (cwd / (value if eq else next(it, ""))).resolve()
        else:
            args.append(a)
    out = ["--runtime", "docker"]
    for opt, path in paths.items():
        out += [opt, str(path)]
    rw = [paths["--store"]] + ([paths["--junit"].parent] if "--junit" in paths else [])
    ro = [paths["--recipe"].parent] if "--recipe" in paths else []
    return out + args, rw, ro


def main(argv: Sequence[str]) -> int:
    def err(m: str) -> None:
        print(m, file=sys.stderr)

    try:
        if list(argv[:1]) == ["build"] and len(argv) == 1:
            node = hd.build_images(log=err)
            print(node)
            print(build_harness_image(node, log=err))
            return 0
        if argv[:1] != ["campaign"]:
            err(USAGE)
            return EXIT_ERROR
        args, rw, ro = launcher_args(argv[1:], Path.cwd())
        return run_in_container(args, rw, ro, log=err)
    except (ValueError, hd.DockerError) as e:
        err(f"hiwater campaign: {e}")
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
