"""`hiwater campaign`: start a cluster, attack it while real clients write and read, check the
history, write one report.

    run dir: store/<name>/<YYYYMMDDTHHMMSS>/   (store/latest and store/<name>/latest link it)
        options.json   what was asked (and the seed)
        history.jsonl  every client and nemesis op, written while running
        results.json   the checkers' verdicts, the policy's judgement, live probe findings
        logs/          ZooKeeper's and every broker's log
        report.html    the page a person reads

Exit codes: 0 the history is valid under the configuration's policy, 1 anomalies outside the
policy (or a live invariant broken), 2 unknown (a checker ran out of time, or the final reads
could not finish), 3 an error (the cluster could not start, bad options, ...).

Phases, as Jepsen's Kafka test: setup (cluster, topics), main (workload + nemesis until the
time limit), heal (the nemesis's final generator: resume, restart, heal the network, remove
toxics), recovery wait, final reads (fresh clients read every key from the beginning up to the
highest offset seen), teardown (every process stopped, also on failure or Ctrl-C), check,
report. A probe thread samples every broker's replica state during the run and checks the
invariants that a live cluster can show (see `LiveProbe`).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import os
import random
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from harness.history import JsonlWriter, read_jsonl
from harness.probe import LiveProbe
from harness.runtime.base import Runtime
from harness.runtime.ports import KafkaClients
from harness.topic_settings import sample_cluster

if TYPE_CHECKING:
    from collections.abc import Iterator

    from harness.clients.logs import ClientLogs
    from harness.history import Op
    from harness.workloads.queue import QueueOpts, QueueRun
    from harness.workloads.recorder import Recorder
    from harness.workloads.register import RegisterRun
    from nemesis.faults import Fault, LeaderOf
    from nemesis.packages import Package
    from nemesis.port import Cluster
    from nemesis.runner import NemesisRunner
    from nemesis.schedule import Step

log = logging.getLogger(__name__)

EXIT_VALID, EXIT_INVALID, EXIT_UNKNOWN, EXIT_ERROR = 0, 1, 2, 3

Json = dict[str, object]  # a JSON object: options.json, results.json and their parts


class ProgressSample(TypedDict):
    """What the terminal's progress line is fed every half second."""

    ops: int
    counts: dict[str, int]  # completed ops by type (ok, fail, info)
    nemesis: str | None  # the latest fault
    remaining_s: float
    client_errors: int


Progress = Callable[[ProgressSample], None]


class Victims(TypedDict, total=False):
    """A scripted round's targets (see `_victims`)."""

    X: str
    Y: str
    partitions: int
    exposed: int


@dataclass(frozen=True)
class CampaignOptions:
    """What a campaign runs. The defaults are the safe configuration and the standard fault
    mix, about a minute long."""

    name: str = "queue"
    workload: str = "queue"  # queue | register
    time_limit_s: float = 40.0
    seed: int | None = None
    store: Path = Path("store")
    # cluster (local runtime) or an existing one
    bootstrap: str | None = None
    runtime: str = "local"  # local | docker (harness.runtime.docker) when no bootstrap
    # docker: the brokers' node recipe (harness/runtime/recipe.py; default: hiwater's own)
    recipe: Path | None = None
    # docker: how a pause is made: "freeze" (docker pause) or "sigstop" (the broker process)
    docker_pause: str = "freeze"
    brokers: int = 3
    replication_factor: int = 3
    min_insync_replicas: int = 2
    unclean_leader_election: bool = False
    bugs: tuple[str, ...] = ()
    broker_overrides: Mapping[str, str] = field(default_factory=dict)
    # the workload's topics' own configs (CreateTopics), e.g. {"min.insync.replicas": "3"}
    topic_configs: Mapping[str, str] = field(default_factory=dict)
    # clients
    client: str = "confluent"
    acks: str = "all"
    idempotence: bool = True
    concurrency: int = 4
    rate: float = 60.0
    key_count: int = 8
    partitions: int = 2
    sub_via: tuple[str, ...] = ("assign",)
    crash_clients: bool = False
    # nemesis
    nemesis: tuple[str, ...] = ("standard",)
    nemesis_interval_s: float = 8.0
    rotate_period_s: float | None = None
    target_leader: bool = False  # focus faults on the leader of the first key's partition
    # node specs (nemesis.faults.TARGET_NAMES: one, majority, all, leader, ...) for the
    # kill/pause/wipe/lose-unflushed/corrupt/restart packages; () keeps each package's own
    nemesis_targets: tuple[str, ...] = ()
    # a scripted nemesis instead of `nemesis` (SCENARIOS), repeated until the time limit
    scenario: str | None = None
    # after the main phase
    recovery_wait_s: float = 8.0
    final_time_limit_s: float = 60.0
    check_time_limit_s: float = 30.0
    report: bool = True

    def __post_init__(self) -> None:
        if self.workload not in ("queue", "register"):
            raise ValueError(f"--workload must be queue or register; got {self.workload!r}")
        if self.time_limit_s <= 0 or self.brokers < 1:
            raise ValueError("--time-limit and --brokers must be positive")
        if self.bootstrap is not None:
            _check_bootstrap(self.bootstrap)
        if self.runtime not in ("local", "docker"):
            raise ValueError(f"runtime must be local or docker, not {self.runtime!r}")
        from nemesis.faults import check_spec

        for t in self.nemesis_targets:
            try:
                check_spec(t)
            except ValueError:
                raise ValueError(f"--nemesis-targets: unknown node spec {t!r}") from None
        if self.scenario is not None and self.scenario not in SCENARIOS:
            raise ValueError(f"--scenario must be one of {', '.join(SCENARIOS)}; "
                             f"got {self.scenario!r}")
        if (self.recipe is not None or self.docker_pause != "freeze") and \
                self.runtime != "docker":
            raise ValueError("--recipe and --docker-pause need --runtime docker")
        from harness.runtime.docker import PAUSE_MODES

        if self.docker_pause not in PAUSE_MODES:
            raise ValueError(f"--docker-pause must be one of {', '.join(PAUSE_MODES)}; got "
                             f"{self.docker_pause!r}")
        if self.recipe is not None:
            from harness.runtime.recipe import load_recipe

            r = load_recipe(self.recipe)
            if r.max_brokers is not None and self.brokers > r.max_brokers:
                raise ValueError(f"recipe {r.name} runs at most {r.max_brokers} broker(s); "
                                 f"got --brokers {self.brokers}")
        if self.scenario == "slow-follower" and self.runtime != "docker":
            raise ValueError("--scenario slow-follower needs --runtime docker (a proxy link "
                             "per pair of brokers)")
        from harness.preflight import check_options

        check_options(self)  # every other value (issue #16)

    def to_json(self) -> Json:
        d = dataclasses.asdict(self)
        d["store"] = str(self.store)
        d["recipe"] = None if self.recipe is None else str(self.recipe)
        d["broker_overrides"] = dict(self.broker_overrides)
        d["topic_configs"] = dict(self.topic_configs)
        return d

    def server_properties(self) -> dict[str, str]:
        return {
            "min.insync.replicas": str(self.min_insync_replicas),
            "default.replication.factor": str(min(self.replication_factor, self.brokers)),
            "unclean.leader.election.enable": str(self.unclean_leader_election).lower(),
            "replica.lag.time.max.ms": "6000",
            "zookeeper.session.timeout.ms": "4000",
            "group.initial.rebalance.delay.ms": "300",
            "group.min.session.timeout.ms": "1000",
            "auto.leader.rebalance.enable": "true",
            "leader.imbalance.check.interval.seconds": "10",
            **dict(self.broker_overrides),
        }


def _check_bootstrap(bootstrap: str) -> None:
    from harness.preflight import parse_bootstrap

    parse_bootstrap(bootstrap)


# ---------------------------------------------------------------------------------------
# run directory


def new_run_dir(store: Path, name: str, now: datetime.datetime | None = None) -> Path:
    now = now or datetime.datetime.now()
    base = Path(store) / name
    stamp = now.strftime("%Y%m%dT%H%M%S")
    d = base / stamp
    n = 1
    while d.exists():
        n += 1
        d = base / f"{stamp}-{n}"
    d.mkdir(parents=True)
    for link in (base / "latest", Path(store) / "latest"):
        tmp = link.with_name(link.name + ".tmp")
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()
        tmp.symlink_to(os.path.relpath(d, link.parent))
        tmp.replace(link)
    return d


# ---------------------------------------------------------------------------------------
# the campaign


@dataclass
class CampaignResult:
    run_dir: Path
    exit_code: int
    verdict: str
    bad: list[str]
    results: Json


def _runtime(opts: CampaignOptions, run_dir: Path) -> Runtime:
    if opts.bootstrap is not None:
        from harness.runtime.existing import ExistingClusterRuntime

        return ExistingClusterRuntime(opts.bootstrap)
    if opts.runtime == "docker":
        from harness.runtime.docker import DockerRuntime
        from harness.runtime.recipe import load_recipe

        recipe = None if opts.recipe is None else load_recipe(opts.recipe)
        return DockerRuntime(run_dir / "cluster", opts.brokers, opts.server_properties(),
                             opts.bugs, recipe=recipe, pause_mode=opts.docker_pause,
                             log=log.info)
    from harness.runtime.local import LocalRuntime

    return LocalRuntime(run_dir / "cluster", opts.brokers, opts.server_properties(), opts.bugs)


def _package(opts: CampaignOptions) -> Package:
    from nemesis import packages as p

    if opts.scenario is not None and opts.bootstrap is None:
        return _scenario(opts)
    names = () if opts.bootstrap is not None else opts.nemesis
    if not opts.nemesis_targets:
        return p.package_for(names, opts.nemesis_interval_s, opts.rotate_period_s)
    # package_for with the node faults aimed at `nemesis_targets`
    targeted: dict[str, Callable[..., Package]] = {
        "kill": p.kill_package, "pause": p.pause_package, "wipe": p.wipe_package,
        "lose-unflushed": p.lose_unflushed_package, "corrupt": p.corrupt_package,
        "restart": p.clean_restart_package}
    pkgs = []
    for name in p.package_for(names).name.split("+"):
        if name == "none":
            continue
        if name in targeted:
            pkgs.append(targeted[name](targets=opts.nemesis_targets,
                                       interval_s=opts.nemesis_interval_s))
        else:
            pkgs.append(p.PACKAGE_BUILDERS[name](opts.nemesis_interval_s))
    if not pkgs:
        return p.none_package()
    if opts.rotate_period_s is not None:
        return p.rotating_package(pkgs, opts.rotate_period_s)
    return pkgs[0] if len(pkgs) == 1 else p.compose(pkgs)


# Scripted nemeses (`--scenario`; Jepsen NATS's pause-kill/part-kill): fixed steps that drive the
# cluster into one window, repeated; `nemesis_interval_s` sets their pace (I below). Each round
# picks its victims from the brokers' live replica states (`_victims`): a broker X leading
# workload partitions and a broker Y among their followers, and crashes X at a moment when the
# round would cost committed records (it waits for one at most 15 s). The "successor" of X's
# partition is the ISR member first in its assignment after X (the one the controller elects).
SCENARIOS: dict[str, str] = {
    "crash-leader-then-successor":
        "X crashes; half a ZooKeeper session later, before the controller has noticed, so "
        "does Y, the successor of (most of) X's partitions: the controller elects the dead Y, "
        "the third replica follows it until Y's session expires as well, then leads. Both "
        "start I s after the second crash; I s later the next round.",
    "crash-leader-then-follower":
        "X crashes; 3/4 of a ZooKeeper session later so does Y, a follower but not the "
        "successor of (most of) X's partitions and not the controller: once X's session "
        "expires the controller elects the successor with an ISR that still names Y, so until "
        "Y's session expires too the new leader's high watermark stays where its last fetch "
        "as a follower left it, below the start of its epoch. Both start I s after the second "
        "crash; I s later the next round.",
    "isolated-leaders-crash":
        "every broker is cut from the other brokers (each keeps ZooKeeper) for I s: past "
        "replica.lag.time.max.ms each leader shrinks its ISR to itself and goes on alone; then "
        "X crashes, the network heals and X starts again (only an unclean election brings "
        "its partitions back meanwhile); 4 s later the next round.",
    "slow-follower":
        "a 2 s latency toxic on what the leader of the first key's partition sends one of its "
        "followers (their own proxy link: the docker runtime) for I s, then removed; I s "
        "later the next round. The follower's fetches lag: acks=all sends wait for it until "
        "the leader drops it from the ISR (replica.lag.time.max.ms), and it comes back after.",
}
SLOW_FOLLOWER_LATENCY_MS = 2000


def _victims(runtime: Runtime, prefix: str, scenario: str) -> Victims:
    """{"X": node, "Y": node, "partitions": n, "exposed": m} for `scenario` (see SCENARIOS),
    from every broker's replica states: of the `prefix*` partitions led by X, n are ones where
    the round can hurt (crash-leader-then-successor: Y is the successor; -then-follower: Y a
    follower, not the successor, and not the controller; isolated-leaders-crash: all), and m
    records at or above what the round would lose are committed now (below X's HW but above
    the third replica's HW / the successor's HW / every other replica's log end). The pair
    with the most exposed records, then the most partitions; on ties a Y that leads few
    partitions, and neither the controller."""
    from harness.runtime.base import ReplicaState, node_id, node_name

    replicas: dict[tuple[str, int], dict[int, ReplicaState]] = {}
    for node in runtime.nodes:
        try:
            states = runtime.replica_states(node, timeout_s=1.0)["replicas"]
        except Exception:
            continue
        for state in states:
            if state["topic"].startswith(prefix):
                replicas.setdefault((state["topic"], int(state["partition"])), {})[
                    node_id(node)] = state
    best: dict[tuple[str, int], ReplicaState] = {}
    for tp, rs in replicas.items():
        for r in rs.values():
            if r["role"] == "leader" and (
                    tp not in best or r["leader_epoch"] > best[tp]["leader_epoch"]):
                best[tp] = r

    def led(b: int) -> int:
        return sum(int(r["leader"]) == b for r in best.values())

    controller = runtime.controller()
    c = -1 if controller is None else node_id(controller)
    pool = [node_id(n) for n in runtime.nodes]

    def score(x: int, y: int | None) -> tuple[int, int]:
        exposed = hurt = 0
        for tp, r in best.items():
            if int(r["leader"]) != x:
                continue
            hw = int(r["high_watermark"])
            others = {b: o for b, o in replicas[tp].items() if b != x}
            followers = [b for b in r["replicas"] if b != x and b in r["isr"]]
            if y is None:
                end = max([int(o["log_end_offset"]) for o in others.values()] or [0])
            elif y not in followers or (followers[0] == y) != (
                    scenario == "crash-leader-then-successor"):
                continue
            elif scenario == "crash-leader-then-successor":
                third = [b for b in followers if b != y]
                end = min([int(others[b]["high_watermark"]) for b in third if b in others]
                          or [hw])
            else:
                end = int(others[followers[0]]["high_watermark"]) \
                    if followers[0] in others else hw
            hurt += 1
            exposed += max(0, hw - end)
        return exposed, hurt

    if scenario == "isolated-leaders-crash":
        (m, n), _, x = max((score(x, None), x != c, -x) for x in pool)
        return {"X": node_name(-x), "partitions": n, "exposed": m}
    pairs = [(score(x, y), -led(y), x != c, y != c, -x, -y)
             for x in pool for y in pool
             if x != y and (y != c or scenario == "crash-leader-then-successor")]
    if not pairs:
        return {}
    (m, n), *_, x, y = max(pairs)
    return {"X": node_name(-x), "Y": node_name(-y), "partitions": n, "exposed": m}


def _scenario(opts: CampaignOptions) -> Package:
    from nemesis import schedule
    from nemesis.executor import execute
    from nemesis.faults import (
        HealNetwork,
        KillNode,
        LeaderOf,
        PartitionNetwork,
        RemoveToxics,
        StartNode,
        Toxic,
        grudge_value,
    )
    from nemesis.packages import Package

    assert opts.scenario is not None
    scenario = opts.scenario
    i = opts.nemesis_interval_s
    if opts.workload == "queue":
        prefix = _queue_opts(opts).topic_prefix
    else:
        from harness.workloads.register import RegisterOpts

        prefix = RegisterOpts().topic
    # kills of X or Y, which are chosen when the round's first kill runs
    kill = {v: KillNode((v,)) for v in ("X", "Y")}
    picked: list[Victims] = [{}]  # this round's targets, chosen at its first kill

    def executor(fault: Fault, runtime: Cluster, rng: random.Random,
                 focus: LeaderOf | None) -> object:
        for v, k in kill.items():
            if fault == k:
                if not isinstance(runtime, Runtime):
                    return {"error": "scripted scenarios need a cluster runtime"}
                if v == "X":
                    # wait (bounded) for a moment when the crash can hurt: committed records
                    # exposed (see `_victims`), else at least partitions it would hit. Alone
                    # in their ISRs, leaders expose records whose acks may not have reached
                    # the clients yet (timed out): there, wait for a few.
                    need = 3 if scenario == "isolated-leaders-crash" else 1
                    clock = runtime.clock()
                    end = clock.monotonic() + 15.0
                    picked[0] = _victims(runtime, prefix, scenario)
                    while picked[0].get("exposed", 0) < need and clock.monotonic() < end:
                        clock.sleep(0.1)
                        got = _victims(runtime, prefix, scenario)
                        if got.get("partitions") or not picked[0].get("partitions"):
                            picked[0] = got
                target = picked[0].get("X") if v == "X" else picked[0].get("Y")
                if target is None:
                    return {"error": f"no target: no {v}", "picked": dict(picked[0])}
                killed = execute(KillNode((target,)), runtime, rng, focus)
                return {"picked": dict(picked[0]),
                        **(killed if isinstance(killed, dict) else {"result": killed})}
        return execute(fault, runtime, rng, focus)

    session_s = float(opts.server_properties()["zookeeper.session.timeout.ms"]) / 1000
    steps: list[tuple[float, Fault]]
    if scenario == "crash-leader-then-successor":
        steps = [(i, kill["X"]), (session_s / 2, kill["Y"]), (i, StartNode())]
    elif scenario == "crash-leader-then-follower":
        steps = [(i, kill["X"]), (session_s * 3 / 4, kill["Y"]), (i, StartNode())]
    elif scenario == "slow-follower":
        slow = Toxic(targets=LeaderOf(f"{prefix}0", 0), source="one", toxic_type="latency",
                     attributes=(("latency", SLOW_FOLLOWER_LATENCY_MS), ("jitter", 0)))
        steps = [(i, slow), (i, RemoveToxics())]
    else:
        nodes = [f"n{b}" for b in range(1, opts.brokers + 1)]
        apart = PartitionNetwork(grudge_value(
            {n: tuple(m for m in nodes if m != n) for n in nodes}))
        steps = [(1.0, apart), (i, kill["X"]), (1.0, HealNetwork()), (0.0, StartNode()),
                 (3.0, HealNetwork())]

    def gen(_rng: random.Random) -> Iterator[Step]:
        while True:
            for delay, fault in steps:
                yield schedule.Step(delay, fault)

    fs = frozenset(f.f for _, f in steps)
    return Package(f"scenario:{scenario}", gen, (HealNetwork(), StartNode()),
                   executor=executor, fs=fs)


def run_campaign(opts: CampaignOptions,
                 progress: Progress | None = None) -> CampaignResult:
    seed = opts.seed if opts.seed is not None else random.SystemRandom().randrange(2**31)
    opts = dataclasses.replace(opts, seed=seed)
    run_dir = new_run_dir(opts.store, opts.name)
    (run_dir / "options.json").write_text(json.dumps(opts.to_json(), indent=2))
    handler = _file_handler(run_dir / "campaign.log")
    logging.getLogger().addHandler(handler)
    # the client libraries' own logs (librdkafka, kafka-python, kazoo): logs/clients.log
    from harness.clients.logs import ClientLogs

    client_logs = ClientLogs(run_dir / "logs" / "clients.log").open()
    results: Json = {"seed": seed, "options": opts.to_json()}
    runtime = None
    try:
        runtime = _runtime(opts, run_dir)
        runtime.start()
        results["bootstrap"] = runtime.bootstrap
        results["capabilities"] = runtime.capabilities()
        _main_phase(opts, runtime, run_dir, results, progress, client_logs)
    except KeyboardInterrupt:
        results["error"] = "interrupted"
    except Exception as e:
        results["error"] = f"{type(e).__name__}: {e}"
        results["traceback"] = traceback.format_exc()
        log.exception("campaign failed")
    finally:
        try:
            if runtime is not None:
                try:
                    runtime.collect_logs(run_dir / "logs")
                except Exception as e:
                    log.warning("collecting logs failed: %s", e)
                runtime.stop()
        finally:
            client_logs.close()
            results["client_log"] = {"lines": client_logs.lines, "errors": client_logs.errors}
    try:
        return _conclude(opts, run_dir, results)
    finally:
        # fix: left on the root logger, the handler made every later campaign in the same
        # process (tests, scripts) write into this run's campaign.log, and kept it open
        logging.getLogger().removeHandler(handler)
        handler.close()


def _main_phase(opts: CampaignOptions, runtime: Runtime, run_dir: Path, results: Json,
                progress: Progress | None, client_logs: ClientLogs | None = None) -> None:
    from harness.workloads.recorder import Recorder
    from nemesis.runner import heal_all, run_nemesis

    assert opts.seed is not None
    clients = runtime.clients()
    if not isinstance(clients, KafkaClients):
        raise ValueError(f"a campaign's workloads run Kafka-protocol clients; this runtime's "
                         f"clients are {clients.kind} (a simulated cluster runs its "
                         f"schedule with harness.sim.schedule)")
    # the workloads' threads keep time.monotonic() deadlines: the clock must be the wall's
    clock = runtime.clock()
    writer = JsonlWriter(run_dir / "history.jsonl")
    recorder = Recorder(writer, concurrency=opts.concurrency)
    stop = threading.Event()
    abort = threading.Event()
    deadline = clock.monotonic() + opts.time_limit_s
    probe = LiveProbe(runtime, abort, recorder.elapsed_ns)
    probe.settings.wanted = _workload_topic(opts)
    if opts.bootstrap is None:
        probe.start()
    package = _package(opts)
    focus = _focus(opts)
    nemesis_stop = threading.Event()

    nemesis = run_nemesis(runtime, package, recorder.nemesis, nemesis_stop, deadline,
                          seed=opts.seed, focus=focus, final=True, clock=clock)
    nemesis_info: Json = {"package": package.name, "fs": sorted(package.fs)}
    results["nemesis"] = nemesis_info

    def before_final() -> None:
        nemesis_stop.set()
        nemesis.join(120)
        if nemesis.error is not None:
            nemesis_info["error"] = f"{type(nemesis.error).__name__}: {nemesis.error}"
        if opts.bootstrap is None:
            heal_all(runtime, recorder.nemesis)

    reporter = _Reporter(recorder, nemesis, deadline, progress, abort, client_logs)
    reporter.start()
    try:
        if opts.workload == "queue":
            run = _run_queue(opts, clients, recorder, stop, deadline, before_final, abort)
            results["workload"] = {
                "targets": {str(k): v for k, v in run.targets.items()},
                "final_complete": run.final_complete,
                "unreached": {str(t): {str(k): v for k, v in u.items()}
                              for t, u in run.unreached.items() if u},
                # keys a final-phase thread finished at a confirmed end below the target
                "truncated": {str(t): {str(k): e for k, e in u.items()}
                              for t, u in run.truncated.items() if u},
                "errors": run.errors,
            }
        else:
            rrun = _run_register(opts, clients.bootstrap, recorder, stop, deadline)
            before_final()
            results["workload"] = {"errors": list(rrun.errors)}
    finally:
        abort.set()
        nemesis_stop.set()
        nemesis.join(60)
        reporter.join(5)
        writer.close()
    results["probes"] = probe.result() if opts.bootstrap is None else {
        "samples": 0, "violations": [], "valid?": True, "note": "existing cluster: no probes"}
    if opts.bootstrap is None:
        if not probe.settings:
            sample_cluster(runtime, probe.settings)
        results["topic_settings"] = probe.settings.result()


def _workload_topic(opts: CampaignOptions) -> Callable[[str], bool]:
    """Whether a topic is one the workload uses (its settings go to results.json)."""
    if opts.workload == "queue":
        prefix = _queue_opts(opts).topic_prefix
        return lambda t: t.startswith(prefix) and not t.startswith("__")
    from harness.workloads.register import RegisterOpts

    name = RegisterOpts().topic
    return lambda t: t == name


def _focus(opts: CampaignOptions) -> LeaderOf | None:
    if not opts.target_leader or opts.workload != "queue":
        return None
    from nemesis.faults import LeaderOf

    return LeaderOf(f"{_queue_opts(opts).topic_prefix}0", 0)


def _queue_opts(opts: CampaignOptions) -> QueueOpts:
    from harness.workloads.queue import QueueOpts

    return QueueOpts(
        client=opts.client, concurrency=opts.concurrency, rate=opts.rate,
        key_count=opts.key_count, partitions=opts.partitions,
        replication_factor=min(opts.replication_factor, opts.brokers), acks=opts.acks,
        idempotence=opts.idempotence, sub_via=opts.sub_via, crash_clients=opts.crash_clients,
        seed=opts.seed, recovery_wait_s=opts.recovery_wait_s,
        final_time_limit_s=opts.final_time_limit_s, topic_configs=dict(opts.topic_configs),
    )


def _run_queue(opts: CampaignOptions, clients: KafkaClients, recorder: Recorder,
               stop: threading.Event, deadline: float, before_final: Callable[[], None],
               abort: threading.Event) -> QueueRun:
    from harness.workloads.queue import run_queue

    return run_queue(clients.bootstrap, _queue_opts(opts), recorder, stop, deadline,
                     before_final=before_final, abort=abort,
                     client_factory=clients.queue_client)


def _run_register(opts: CampaignOptions, bootstrap: str, recorder: Recorder,
                  stop: threading.Event, deadline: float) -> RegisterRun:
    from harness.workloads.register import RegisterOpts, run_register

    ropts = RegisterOpts(concurrency=opts.concurrency, rate=opts.rate,
                         replication_factor=min(opts.replication_factor, opts.brokers),
                         acks=opts.acks, idempotence=opts.idempotence, seed=opts.seed,
                         topic_configs=dict(opts.topic_configs))
    return run_register(bootstrap, ropts, recorder, stop, deadline)


class _Reporter(threading.Thread):
    """Feeds the progress display: op counts by type, the nemesis's latest fault."""

    def __init__(self, recorder: Recorder, nemesis: NemesisRunner, deadline: float,
                 progress: Progress | None, stop: threading.Event,
                 client_logs: ClientLogs | None = None) -> None:
        super().__init__(name="progress", daemon=True)
        self.recorder, self.nemesis, self.deadline = recorder, nemesis, deadline
        self.progress, self.stop_event = progress, stop
        self.client_logs = client_logs  # harness.clients.logs.ClientLogs: its error count

    def run(self) -> None:
        if self.progress is None:
            return
        counts: dict[str, int] = {}
        fault: str | None = None
        seen = 0
        while not self.stop_event.wait(0.5):
            ops = self.recorder.ops() if self.recorder.keep else []
            for op in ops[seen:]:
                if op.process == "nemesis":
                    fault = f"{op.f} {json.dumps(op.value, default=str)[:60]}"
                elif op.type != "invoke":
                    counts[op.type] = counts.get(op.type, 0) + 1
            seen = len(ops)
            self.progress({"ops": seen, "counts": dict(counts), "nemesis": fault,
                           "remaining_s": max(0.0, self.deadline - time.monotonic()),
                           "client_errors": 0 if self.client_logs is None
                           else self.client_logs.errors})


def _conclude(opts: CampaignOptions, run_dir: Path, results: Json) -> CampaignResult:
    from harness.checkers import check
    from harness.checkers.policy import QueuePolicy, run_verdict

    history_path = run_dir / "history.jsonl"
    bad: list[str] = []
    verdict = "unknown"
    code = EXIT_ERROR
    if "error" not in results and history_path.exists():
        history = read_jsonl(history_path)
        _write_columnar(history, run_dir)  # history.parquet for hiwater analyze (issue #10)
        policy = QueuePolicy.of(opts.sub_via)
        checked = check(history, policy, time_limit_s=opts.check_time_limit_s)
        results.update(checked)
        results["policy"] = {"sub_via": sorted(policy.sub_via), "ww_deps": policy.ww_deps,
                             "ignore": sorted(policy.ignore)}
        verdict, bad = run_verdict(checked, results)
        code = {"valid": EXIT_VALID, "invalid": EXIT_INVALID}.get(verdict, EXIT_UNKNOWN)
    results["verdict"] = verdict
    results["bad"] = bad
    results["exit_code"] = code
    (run_dir / "results.json").write_text(json.dumps(results, indent=2, default=str))
    if opts.report:
        try:
            from harness.report import render

            render(run_dir)
        except Exception as e:
            log.exception("report failed: %s", e)
            results["report_error"] = str(e)
            (run_dir / "results.json").write_text(json.dumps(results, indent=2, default=str))
    return CampaignResult(run_dir, code, verdict, bad, results)


def _part(results: Json, key: str) -> Json:
    """results[key] when it is a JSON object, else an empty one."""
    found = results.get(key)
    return found if isinstance(found, dict) else {}


def _file_handler(path: Path) -> logging.Handler:
    h = logging.FileHandler(path)
    h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    h.setLevel(logging.INFO)
    return h


def _write_columnar(history: list[Op], run_dir: Path) -> None:
    """history.parquet beside history.jsonl: harness.history's fixed schema plus the queue
    checker's int side columns (harness.checkers.columnar); never fails the run."""
    try:
        from harness.checkers.columnar import write_columnar

        write_columnar(history, run_dir / "history.parquet.tmp")
        os.replace(run_dir / "history.parquet.tmp", run_dir / "history.parquet")
    except Exception as e:
        log.warning("history.parquet not written: %s", e)
