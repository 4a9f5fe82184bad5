"""The `hiwater` command line."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="hiwater: a Kafka-style replicated log, formally checked, attacked Jepsen-style.",
)
# Exhausted in about a minute. The larger bounds (3 brokers, 2 records, 3 leader
# epochs, 1 crash) are `--records 2 --leader-epochs 3`, which takes far longer (README).
DEFAULT_BOUNDS = {"brokers": 3, "records": 1, "leader_epochs": 2, "crashes": 1}

spec_app = typer.Typer(no_args_is_help=True, help="The formal side: model checker, bugs, Z3.")
app.add_typer(spec_app, name="spec")


# ---------------------------------------------------------------------------------------
# hiwater spec


@spec_app.command("bugs")
def spec_bugs() -> None:
    """List the historic-bug switches: one name per line first, then what each one is."""
    from spec.bugs import CATALOGUE

    for b in CATALOGUE:
        typer.echo(b.name)
    typer.echo("")
    for b in CATALOGUE:
        bd = b.bounds
        typer.echo(f"{b.name} [{b.reference}]: {b.description}")
        typer.echo(f"    bounds: {bd.brokers} brokers, {bd.records} records, "
                   f"{bd.leader_epochs} leader epochs, {bd.crashes} crash(es), "
                   f"{bd.lossy_crashes} lossy, {bd.expiries} expiries, acks={bd.acks}")


@spec_app.command("check")
def spec_check(
    bug: Annotated[str | None, typer.Option(help="re-introduce one historic bug")] = None,
    brokers: Annotated[int | None, typer.Option(help="number of brokers")] = None,
    records: Annotated[int | None, typer.Option(help="records produced")] = None,
    leader_epochs: Annotated[int | None, typer.Option(help="leader epochs 0..N-1")] = None,
    controller_epochs: Annotated[int | None, typer.Option(help="controller elections")] = None,
    crashes: Annotated[int | None, typer.Option(help="broker crashes")] = None,
    lossy_crashes: Annotated[int | None, typer.Option(help="crashes losing page cache")] = None,
    expiries: Annotated[int | None, typer.Option(help="expiries of live sessions")] = None,
    leader_moves: Annotated[int | None, typer.Option(help="operator leader moves")] = None,
    drops: Annotated[int | None, typer.Option(help="lost messages")] = None,
    duplicates: Annotated[int | None, typer.Option(help="duplicated messages")] = None,
    acks: Annotated[int | None, typer.Option(help="producer acks: 0, 1 or -1")] = None,
    network: Annotated[str | None, typer.Option(help="rpc or async")] = None,
    zk_watches: Annotated[str | None, typer.Option(help="sync or async")] = None,
    isr_writes: Annotated[str | None, typer.Option(help="sync or async")] = None,
    rebalance: Annotated[bool | None, typer.Option(help="auto leader rebalance may fire")] = None,
    list_offsets: Annotated[int | None, typer.Option(help="client ListOffsets requests")] = None,
    invariant: Annotated[list[str] | None, typer.Option(
        help="check only this invariant (repeatable); default: all")] = None,
    strategy: Annotated[str | None, typer.Option(
        help="bfs (shortest trace) or dfs; default bfs, or the bug's own")] = None,
    symmetry: Annotated[bool, typer.Option(help="symmetry reduction over broker ids")] = True,
    max_states: Annotated[int | None, typer.Option(help="stop after this many")] = None,
    time_limit: Annotated[float | None, typer.Option(help="stop after seconds")] = None,
    save_trace: Annotated[Path | None, typer.Option(help="write the trace as JSONL")] = None,
    quiet: Annotated[bool, typer.Option(help="no progress lines")] = False,
    workers: Annotated[int | None, typer.Option(
        help="processes for a BFS; default: the number of cores; 1: a single process")] = None,
) -> None:
    """Model-check the real core. Exit 0: no violation within the bounds; 1: a violation
    (its shortest trace is printed); 2: a limit stopped the search first."""
    from core.config import ProtocolConfig
    from spec.bugs import by_name
    from spec.checker import check
    from spec.model import Bounds, Model
    from spec.trace import format_trace, save

    if bug is not None:
        try:
            scenario = by_name(bug)
        except KeyError as e:
            typer.echo(str(e.args[0]), err=True)
            raise typer.Exit(3) from None
        config, bounds = scenario.config(), scenario.bounds
        invariants = scenario.invariants
        strategy = strategy or scenario.strategy
    else:
        invariants = None
        config, bounds = ProtocolConfig(), Bounds(**DEFAULT_BOUNDS)
    if invariant:
        invariants = tuple(invariant)
    strategy = strategy or "bfs"
    overrides = {k: v for k, v in dict(
        brokers=brokers, records=records, leader_epochs=leader_epochs,
        controller_epochs=controller_epochs, crashes=crashes, lossy_crashes=lossy_crashes,
        expiries=expiries, leader_moves=leader_moves, drops=drops, duplicates=duplicates,
        acks=acks, network=network, zk_watches=zk_watches, isr_writes=isr_writes,
        rebalance=rebalance, list_offsets=list_offsets,
    ).items() if v is not None}
    try:
        bounds = dataclasses.replace(bounds, **overrides)
    except ValueError as e:
        typer.echo(f"bad bounds: {e}", err=True)
        raise typer.Exit(3) from None
    if workers is None:
        workers = os.cpu_count() or 1
    if workers < 1:
        typer.echo("--workers must be at least 1", err=True)
        raise typer.Exit(3)
    what = f"bug {bug}" if bug else "the fixed protocol"
    model = Model(config, bounds)
    symmetry = symmetry and model.symmetric
    procs = f", {workers} processes" if strategy == "bfs" and workers > 1 else ""
    typer.echo(f"checking {what}: {_bounds_text(bounds)}; {strategy}{procs}"
               f"{', symmetry' if symmetry else ''}; invariants: "
               f"{', '.join(invariants) if invariants else 'all'}")
    last = [time.perf_counter()]

    def progress(states: int, depth: int, seconds: float) -> None:
        if not quiet and time.perf_counter() - last[0] > 5:
            last[0] = time.perf_counter()
            typer.echo(f"  ... {states:,} states, depth {depth}, {seconds:.0f} s", err=True)

    try:
        result = check(model, strategy=strategy, symmetry=symmetry,
                       max_states=max_states, time_limit_s=time_limit, progress=progress,
                       invariants=invariants, workers=workers)
    except ValueError as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(3) from None
    typer.echo(f"{result.states:,} distinct states, {result.transitions:,} transitions, "
               f"depth {result.depth}, {result.seconds:.1f} s "
               f"({result.states_per_second:,.0f} states/s)")
    if result.violation is not None:
        typer.echo(f"counterexample in {len(result.trace) - 1} steps:")
        typer.echo(format_trace(result.trace, result.violation))
        if save_trace is not None:
            save(save_trace, config, bounds, [a for a, _ in result.trace[1:]], result.violation)
            typer.echo(f"trace written to {save_trace}")
        raise typer.Exit(1)
    if not result.exhausted:
        typer.echo(f"no violation found, but the search stopped ({result.stopped_by}) "
                   "before exhausting the bounds")
        raise typer.Exit(2)
    typer.echo("no violation: every reachable state within the bounds satisfies every invariant")


@spec_app.command("replay")
def spec_replay(trace_file: Path) -> None:
    """Replay a saved trace and check it still ends in the same violation (exit 1 if so)."""
    from spec.checker import replay
    from spec.invariants import check_state, check_step
    from spec.model import Model
    from spec.trace import format_trace, load

    try:
        config, bounds, actions, expected = load(trace_file)
    except (OSError, ValueError, TypeError, KeyError) as e:
        typer.echo(f"cannot read trace {trace_file}: {e}", err=True)
        raise typer.Exit(3) from None
    trace = replay(Model(config, bounds), actions)
    violation = None
    for (_, a), (_, b) in itertools.pairwise(trace):
        violation = check_step(a, b) or check_state(b)
        if violation:
            break
    typer.echo(format_trace(trace, violation))
    if expected and violation and violation[0] != expected[0]:
        typer.echo(f"note: the trace was saved as a {expected[0]} violation", err=True)
    raise typer.Exit(1 if violation else 0)


@spec_app.command("prove")
def spec_prove() -> None:
    """Run the Z3 proofs of the protocol's rules (exit 1 if any fails)."""
    from spec.z3.proofs import format_results, run_proofs

    results = run_proofs()
    typer.echo(format_results(results))
    raise typer.Exit(0 if all(r.proved for r in results) else 1)


def _bounds_text(b: object) -> str:
    d = dataclasses.asdict(b)  # type: ignore[call-overload]
    return ", ".join(f"{k}={v}" for k, v in d.items())


# ---------------------------------------------------------------------------------------
# storage, histories, nemesis tools


@app.command("dump-log")
def dump_log(
    file: Path,
    deep_iteration: Annotated[bool, typer.Option("--deep-iteration",
                                                 help="print every record")] = False,
) -> None:
    """Print a segment file (.log, .index, .timeindex) as Kafka's DumpLogSegments does."""
    from broker.store.dump import dump_log as dump

    raise typer.Exit(dump(file, deep_iteration, sys.stdout))


@app.command("check")
def check_history(
    history: Path,
    time_limit: Annotated[float, typer.Option(help="linearizability budget, s")] = 60.0,
    out: Annotated[Path | None, typer.Option(help="write results JSON here")] = None,
) -> None:
    """Check a history (JSONL or Parquet) for queue anomalies and linearizability.
    Exit 0 valid, 1 anomalies, 2 unknown."""
    from harness.checkers import check_file

    try:
        results = check_file(history, time_limit_s=time_limit)
    except (OSError, ValueError) as e:
        typer.echo(f"cannot check {history}: {e}", err=True)
        raise typer.Exit(3) from None
    text = json.dumps(results, indent=2, default=str)
    if out is not None:
        out.write_text(text)
    typer.echo(text)
    valid = results.get("valid?")
    raise typer.Exit(0 if valid is True else 2 if valid == "unknown" else 1)


@app.command("toxiproxy")
def toxiproxy(
    listen: Annotated[str, typer.Option(help="host:port of the HTTP API")] = "127.0.0.1:8474",
) -> None:
    """Run the Toxiproxy-API-compatible proxy server."""
    from nemesis.toxiproxy.__main__ import main as toxi_main

    raise typer.Exit(toxi_main(["--listen", listen]))


@app.command("campaign")
def campaign_cmd(
    name: Annotated[str, typer.Option(help="Run name: store/<name>/<time>/.")] = "queue",
    workload: Annotated[str, typer.Option(help="queue | register")] = "queue",
    time_limit: Annotated[float, typer.Option("--time-limit", help="Main phase, s.")] = 40.0,
    seed: Annotated[int | None, typer.Option(help="Seeds the workload and nemesis.")] = None,
    nemesis: Annotated[str, typer.Option(
        help="Comma list: standard (partition,kill,pause), partition, isolate-leader, "
             "zookeeper, kill, pause, wipe, lose-unflushed, corrupt, restart, toxic, none."
    )] = "standard",
    nemesis_interval: Annotated[float, typer.Option(help="Seconds between faults.")] = 8.0,
    rotate: Annotated[float | None, typer.Option(
        help="Rotate the fault kinds every this many seconds (with quiet periods).")] = None,
    target_leader: Annotated[bool, typer.Option(
        "--target-leader", help="Aim faults at the leader of the first key's partition.")
    ] = False,
    nemesis_targets: Annotated[str, typer.Option(
        "--nemesis-targets",
        help="Comma list of node specs for kill, pause, wipe, lose-unflushed, corrupt and "
             "restart: one, minority, majority, all, leader (with --target-leader), "
             "controller, random. Default: each fault's own (kill/pause: one,all; else one).")
    ] = "",
    scenario: Annotated[str | None, typer.Option(
        help="A scripted nemesis instead of --nemesis: crash-leader-then-successor, "
             "crash-leader-then-follower, isolated-leaders-crash (harness.campaign.SCENARIOS;"
             " paced by --nemesis-interval).")] = None,
    brokers: Annotated[int, typer.Option(help="Local brokers.")] = 3,
    replication_factor: Annotated[int, typer.Option("--rf")] = 3,
    min_isr: Annotated[int, typer.Option("--min-isr")] = 2,
    unclean: Annotated[bool, typer.Option("--unclean", help="Unclean leader election.")] = False,
    bug: Annotated[list[str] | None, typer.Option(
        "--bug", help="Switch a historic bug on in the brokers' core (hiwater spec bugs).")
    ] = None,
    override: Annotated[list[str] | None, typer.Option(
        "--override", help="key=value for every broker's server.properties (repeatable).")
    ] = None,
    acks: Annotated[str, typer.Option(help="Producer acks: all | 1 | 0.")] = "all",
    idempotence: Annotated[bool, typer.Option("--idempotence/--no-idempotence")] = True,
    concurrency: Annotated[int, typer.Option(help="Client workers.")] = 4,
    rate: Annotated[float, typer.Option(help="Ops per second, all workers.")] = 60.0,
    sub_via: Annotated[str, typer.Option(help="assign | subscribe | assign,subscribe")
                       ] = "assign",
    crash_clients: Annotated[bool, typer.Option("--crash-clients")] = False,
    bootstrap: Annotated[str | None, typer.Option(
        help="Test an existing Kafka-protocol cluster instead (no nemesis).")] = None,
    store: Annotated[Path, typer.Option(help="Where run directories go.")] = Path("store"),
) -> None:
    """Run a Jepsen-style campaign and write store/<name>/<time>/report.html.
    Exit 0 valid, 1 anomalies outside the policy, 2 unknown, 3 error."""
    from harness.campaign import EXIT_ERROR, CampaignOptions, run_campaign
    from harness.report.progress import Progress

    try:
        if any("=" not in o for o in override or []):
            raise ValueError("--override needs key=value")
        opts = CampaignOptions(
            name=name, workload=workload, time_limit_s=time_limit, seed=seed,
            nemesis=tuple(n for n in nemesis.split(",") if n), nemesis_interval_s=nemesis_interval,
            rotate_period_s=rotate, target_leader=target_leader,
            nemesis_targets=tuple(t for t in nemesis_targets.split(",") if t),
            scenario=scenario, brokers=brokers,
            replication_factor=replication_factor, min_insync_replicas=min_isr,
            unclean_leader_election=unclean, bugs=tuple(b.replace("-", "_") for b in bug or []),
            broker_overrides=dict(o.split("=", 1) for o in override or []),
            acks=acks, idempotence=idempotence, concurrency=concurrency, rate=rate,
            sub_via=tuple(x for x in sub_via.split(",") if x), crash_clients=crash_clients,
            bootstrap=bootstrap, store=store)
    except ValueError as e:
        typer.echo(f"hiwater campaign: {e}", err=True)
        raise typer.Exit(EXIT_ERROR) from None
    faults = opts.scenario or ",".join(opts.nemesis)
    with Progress(opts.time_limit_s, title=f"{opts.name} / {faults}") as progress:
        result = run_campaign(opts, progress=lambda s: progress.update(
            s["counts"], nemesis_state=s["nemesis"]))
    typer.echo(f"{result.verdict.upper()}: {result.run_dir / 'report.html'}")
    if result.bad:
        typer.echo(f"anomalies outside the policy: {', '.join(result.bad)}")
    if "error" in result.results:
        typer.echo(f"error: {result.results['error']}", err=True)
    raise typer.Exit(result.exit_code)


@app.command("broker")
def broker_cmd(
    config: Annotated[Path, typer.Option("--config", help="A Kafka server.properties file.")],
    override: Annotated[list[str] | None, typer.Option(
        "--override", help="key=value, applied over the file (repeatable).")] = None,
) -> None:
    """Run one broker until SIGTERM/SIGINT (exit 2 bad config, 3 ZooKeeper unreachable)."""
    from broker.runtime.main import main as broker_main

    pairs: dict[str, str] = {}
    for item in override or []:
        if "=" not in item:
            typer.echo(f"--override needs key=value, got {item!r}", err=True)
            raise typer.Exit(2)
        k, v = item.split("=", 1)
        pairs[k.strip()] = v.strip()
    raise typer.Exit(broker_main(str(config), pairs))


CLUSTER_DIR = Path("store/cluster")
cluster_app = typer.Typer(no_args_is_help=True, help="A local cluster: ZooKeeper + N brokers.")
app.add_typer(cluster_app, name="cluster")


@cluster_app.command("up")
def cluster_up(
    brokers: Annotated[int, typer.Option("--brokers", help="Number of brokers (ids 1..N).")] = 3,
    directory: Annotated[Path, typer.Option("--dir", help="Data and logs.")] = CLUSTER_DIR,
    override: Annotated[list[str] | None, typer.Option(
        "--override", help="key=value for every broker.")] = None,
) -> None:
    """Start ZooKeeper and N brokers on 127.0.0.x; print the bootstrap servers once the
    cluster serves Metadata, and leave it running (`hiwater cluster down` stops it)."""
    from broker.runtime.cluster import STATE_FILE, ClusterError, LocalCluster

    if (directory / STATE_FILE).exists():
        typer.echo(f"a cluster is already recorded in {directory}: run `hiwater cluster down "
                   f"--dir {directory}` first", err=True)
        raise typer.Exit(1)
    pairs = dict(item.split("=", 1) for item in override or [] if "=" in item)
    cluster = LocalCluster(directory, brokers, pairs)
    try:
        cluster.start()
    except ClusterError as e:
        typer.echo(f"cluster did not start: {e}", err=True)
        raise typer.Exit(1) from None
    cluster.save_state()
    typer.echo(cluster.bootstrap)


@cluster_app.command("down")
def cluster_down(
    directory: Annotated[Path, typer.Option("--dir", help="As given to up.")] = CLUSTER_DIR,
) -> None:
    """Stop the brokers and ZooKeeper that `up` started (by their recorded PIDs)."""
    from broker.runtime.cluster import ClusterError, down

    try:
        for line in down(directory):
            typer.echo(f"stopped {line}")
    except ClusterError as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(1) from None


def main() -> None:
    app()
