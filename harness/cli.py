"""The `hiwater` command line."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,  # an unexpected error is one line unless --debug
    help="""hiwater: a Kafka-style replicated log, formally checked, attacked
    Jepsen-style.

    Start here:
      1. hiwater campaign     a local cluster under faults for a minute,
                              its history checked (exit 0: valid)
      2. hiwater report       open store/latest/report.html, or re-render it
      3. hiwater spec check   model-check the replication protocol itself
    """,
)
# help panels of the commands with many options (readable at 80 columns)
CLUSTER, WORKLOAD, FAULTS, OUTPUT = "Cluster", "Workload", "Faults", "Output"
BOUNDS, SEARCH = "Bounds", "Search"


def _opt(metavar: str, panel: str, help: str) -> Any:
    """A typer.Option with a short metavar in a help panel."""
    return typer.Option(metavar=metavar, rich_help_panel=panel, help=help)


# Exhausted in about a minute. The larger bounds (3 brokers, 2 records, 3 leader
# epochs, 1 crash) are `--records 2 --leader-epochs 3`, which takes far longer (README).
DEFAULT_BOUNDS: dict[str, Any] = {"brokers": 3, "records": 1, "leader_epochs": 2, "crashes": 1}

spec_app = typer.Typer(no_args_is_help=True, help="The formal side: model checker, bugs, Z3.")
# the first panel, "Commands", holds where to start (campaign, report, spec); then:
MORE = "More commands"
app.add_typer(spec_app, name="spec")


# ---------------------------------------------------------------------------------------
# hiwater spec


@spec_app.command("bugs")
def spec_bugs() -> None:
    """List the historic-bug switches.

    One name per line first, then what each one is."""
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
    bug: Annotated[str | None, _opt("NAME", SEARCH, "Re-introduce one historic bug.")] = None,
    brokers: Annotated[int | None, _opt("N", BOUNDS, "Brokers.")] = None,
    records: Annotated[int | None, _opt("N", BOUNDS, "Records produced.")] = None,
    leader_epochs: Annotated[int | None, _opt("N", BOUNDS, "Leader epochs 0..N-1.")] = None,
    controller_epochs: Annotated[int | None, _opt("N", BOUNDS, "Controller elections.")] = None,
    crashes: Annotated[int | None, _opt("N", BOUNDS, "Broker crashes.")] = None,
    lossy_crashes: Annotated[int | None, _opt(
        "N", BOUNDS, "Crashes that lose the page cache.")] = None,
    expiries: Annotated[int | None, _opt("N", BOUNDS, "Expiries of live sessions.")] = None,
    leader_moves: Annotated[int | None, _opt("N", BOUNDS, "Operator leader moves.")] = None,
    drops: Annotated[int | None, _opt("N", BOUNDS, "Lost messages.")] = None,
    duplicates: Annotated[int | None, _opt("N", BOUNDS, "Duplicated messages.")] = None,
    acks: Annotated[int | None, _opt("N", BOUNDS, "Producer acks: 0, 1 or -1.")] = None,
    network: Annotated[str | None, _opt("MODE", BOUNDS, "rpc or async.")] = None,
    zk_watches: Annotated[str | None, _opt("MODE", BOUNDS, "sync or async.")] = None,
    isr_writes: Annotated[str | None, _opt("MODE", BOUNDS, "sync or async.")] = None,
    rebalance: Annotated[bool | None, _opt(
        "", BOUNDS, "The auto leader rebalance may fire.")] = None,
    list_offsets: Annotated[int | None, _opt("N", BOUNDS, "Client ListOffsets requests.")
                            ] = None,
    shutdowns: Annotated[int | None, _opt("N", BOUNDS, "Controlled shutdowns.")] = None,
    invariant: Annotated[list[str] | None, _opt(
        "NAME", SEARCH, "Check only this invariant (repeatable; default: all).")] = None,
    strategy: Annotated[str | None, _opt(
        "MODE", SEARCH, "bfs (shortest trace) or dfs (default: bfs or the bug's).")] = None,
    symmetry: Annotated[bool, _opt("", SEARCH, "Symmetry reduction over broker ids.")
                        ] = True,
    max_states: Annotated[int | None, _opt("N", SEARCH, "Stop after this many states.")
                          ] = None,
    time_limit: Annotated[float | None, _opt("SECONDS", SEARCH, "Stop after this long.")
                          ] = None,
    save_trace: Annotated[Path | None, _opt("FILE", OUTPUT, "Write the trace as JSONL.")
                          ] = None,
    quiet: Annotated[bool, _opt("", OUTPUT, "No progress lines.")] = False,
    workers: Annotated[int | None, _opt(
        "N", SEARCH, "Processes for a BFS (default: the cores; 1: one).")] = None,
) -> None:
    """Model-check the real core.

    Exit 0: no violation within the bounds; 1: a violation (its shortest
    trace is printed); 2: a limit stopped the search first; 3: bad input."""
    from core.config import ProtocolConfig
    from spec.bugs import by_name
    from spec.checker import check
    from spec.model import Bounds, Model
    from spec.trace import format_trace, save

    if bug is not None:
        try:
            scenario = by_name(bug)
        except KeyError as e:
            typer.echo(f"hiwater spec check: {e.args[0]}", err=True)
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
    if strategy not in ("bfs", "dfs"):
        typer.echo(f"hiwater spec check: --strategy must be bfs or dfs; got {strategy!r}",
                   err=True)
        raise typer.Exit(3)
    overrides: dict[str, Any] = {k: v for k, v in dict(
        brokers=brokers, records=records, leader_epochs=leader_epochs,
        controller_epochs=controller_epochs, crashes=crashes, lossy_crashes=lossy_crashes,
        expiries=expiries, leader_moves=leader_moves, drops=drops, duplicates=duplicates,
        acks=acks, network=network, zk_watches=zk_watches, isr_writes=isr_writes,
        rebalance=rebalance, list_offsets=list_offsets, shutdowns=shutdowns,
    ).items() if v is not None}
    try:
        bounds = dataclasses.replace(bounds, **overrides)
    except ValueError as e:
        typer.echo(f"hiwater spec check: bad bounds: {e}", err=True)
        raise typer.Exit(3) from None
    if workers is None:
        workers = os.cpu_count() or 1
    if workers < 1:
        typer.echo("hiwater spec check: --workers must be at least 1", err=True)
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
        typer.echo(f"hiwater spec check: {e}", err=True)
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
    """Replay a saved trace.

    Checks it still ends in the same violation (exit 1 if so)."""
    from spec.checker import replay
    from spec.invariants import check_state, check_step
    from spec.model import Model
    from spec.trace import format_trace, load

    try:
        config, bounds, actions, expected = load(trace_file)
    except (OSError, ValueError, TypeError, KeyError) as e:
        typer.echo(f"hiwater spec replay: cannot read trace {trace_file}: {e}", err=True)
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
    """Run the Z3 proofs of the protocol's rules.

    Exit 1 if any fails."""
    from spec.z3.proofs import format_results, run_proofs

    results = run_proofs()
    typer.echo(format_results(results))
    raise typer.Exit(0 if all(r.proved for r in results) else 1)


def _bounds_text(b: object) -> str:
    d = dataclasses.asdict(b)  # type: ignore[call-overload]
    return ", ".join(f"{k}={v}" for k, v in d.items())


# ---------------------------------------------------------------------------------------
# storage, histories, nemesis tools


@app.command("dump-log", rich_help_panel=MORE)
def dump_log(
    file: Path,
    deep_iteration: Annotated[bool, typer.Option("--deep-iteration",
                                                 help="print every record")] = False,
) -> None:
    """Print a segment file as Kafka's DumpLogSegments does.

    FILE is a .log, .index or .timeindex file of a partition directory."""
    from broker.store.dump import dump_log as dump

    if not file.is_file():
        typer.echo(f"hiwater dump-log: no file {file}", err=True)
        raise typer.Exit(3)
    if not file.name.endswith((".log", ".index", ".timeindex")):
        typer.echo(f"hiwater dump-log: {file.name}: expected a .log, .index or .timeindex "
                   "file", err=True)
        raise typer.Exit(3)
    raise typer.Exit(dump(file, deep_iteration, sys.stdout))


@app.command("check", rich_help_panel=MORE)
def check_history(
    history: Path,
    time_limit: Annotated[float, typer.Option(help="linearizability budget, s")] = 60.0,
    out: Annotated[Path | None, typer.Option(help="write results JSON here")] = None,
    model: Annotated[str | None, typer.Option(
        metavar="NAME", help="register, cas-register, kv, set or queue.")] = None,
    report: Annotated[Path | None, typer.Option(
        metavar="FILE", help="Write a report page here.")] = None,
) -> None:
    """Check a history for anomalies and linearizability.

    HISTORY is a history.jsonl, Parquet, Jepsen history.edn or
    Porcupine-style log. Exit 0 valid, 1 anomalies, 2 unknown,
    3 unreadable."""
    from harness.checkers import check_command

    try:
        results = check_command(history, time_limit_s=time_limit, model=model, out=out,
                                report=report)
    except (OSError, ValueError) as e:
        typer.echo(f"hiwater check: cannot check {history}: {e}", err=True)
        raise typer.Exit(3) from None
    typer.echo(json.dumps(results, indent=2, default=str))
    valid = results.get("valid?")
    raise typer.Exit(0 if valid is True else 2 if valid == "unknown" else 1)


@app.command("analyze", rich_help_panel=MORE)
def analyze_cmd(
    stores: Annotated[list[Path], typer.Argument(metavar="STORE_DIR...")],
    master: Annotated[str, typer.Option(help="Spark master URL")] = "local[*]",
    out: Annotated[Path, typer.Option(help="tables, aggregates, index.html")] = Path("analysis"),
) -> None:
    """Analyse many runs on Spark: Parquet tables, checks, aggregates, one HTML page."""
    from harness.analysis import main as analyze_main

    for store in stores:  # before Spark starts (it takes seconds)
        if not store.is_dir():
            typer.echo(f"hiwater analyze: no store directory {store}", err=True)
            raise typer.Exit(3)
    if out.exists() and not out.is_dir():
        typer.echo(f"hiwater analyze: --out {out} exists and is not a directory", err=True)
        raise typer.Exit(3)
    raise typer.Exit(analyze_main(stores, out, master))


@app.command("toxiproxy", rich_help_panel=MORE)
def toxiproxy(
    listen: Annotated[str, typer.Option(help="host:port of the HTTP API")] = "127.0.0.1:8474",
) -> None:
    """Run the Toxiproxy-API-compatible proxy server."""
    from harness.preflight import check_listen_address
    from nemesis.toxiproxy.__main__ import main as toxi_main

    try:
        check_listen_address(listen, "--listen")
    except ValueError as e:
        typer.echo(f"hiwater toxiproxy: {e}", err=True)
        raise typer.Exit(3) from None
    raise typer.Exit(toxi_main(["--listen", listen]))


CAMPAIGN_EPILOG = """Faults (--nemesis, a comma list):
  standard        partition + kill + pause (the default)
  partition       network partitions (one node, a majority, ring, bridge)
  isolate-leader  cut the leader of the first key's partition from the rest
  zookeeper       cut brokers from ZooKeeper
  kill, pause     kill -9 / SIGSTOP brokers, restarted / resumed later
  wipe            kill a broker, delete its data, start it
  lose-unflushed  kill, drop what was not fsynced, start (power loss)
  corrupt         kill, flip bytes in a closed segment, start
  restart         clean restart (controlled shutdown)
  toxic           slow links through the Toxiproxy-compatible proxy
  none            no faults

Targets (--nemesis-targets, a comma list, for kill, pause, wipe,
lose-unflushed, corrupt and restart): one, minority, majority, all,
leader (needs --target-leader), controller, random. Default: each
fault's own (kill and pause: one,all; the others: one).

Scenarios (--scenario, scripted instead of --nemesis, paced by
--nemesis-interval):
  crash-leader-then-successor   a leader, then its successor, crash
  crash-leader-then-follower    a leader, then a follower, crash
  isolated-leaders-crash        brokers cut apart, then a leader crashes
  slow-follower                 2 s latency from a leader to one follower
                                (docker: a proxy link per pair of brokers)

Docker (--runtime docker): --recipe FILE runs another broker image
(docker/recipes/); --docker-pause sigstop pauses by SIGSTOP instead of
the cgroup freezer; --harness container runs the harness itself in a
container on the run's network. --junit FILE writes the results as JUnit XML.

Exit codes: 0 valid, 1 anomalies outside the policy, 2 unknown, 3 error.
"""



@app.command("campaign", epilog=CAMPAIGN_EPILOG)
def campaign_cmd(
    ctx: typer.Context,
    brokers: Annotated[int, typer.Option(
        metavar="N", help="Local brokers (ids 1..N).", rich_help_panel=CLUSTER)] = 3,
    replication_factor: Annotated[int, typer.Option(
        "--rf", metavar="N", help="Replication factor of the topics.",
        rich_help_panel=CLUSTER)] = 3,
    min_isr: Annotated[int, typer.Option(
        "--min-isr", metavar="N", help="min.insync.replicas.", rich_help_panel=CLUSTER)] = 2,
    unclean: Annotated[bool, typer.Option(
        "--unclean", metavar="", help="Allow unclean leader election.",
        rich_help_panel=CLUSTER)] = False,
    bug: Annotated[list[str] | None, typer.Option(
        "--bug", metavar="NAME", help="A historic bug to switch on (hiwater spec bugs).",
        rich_help_panel=CLUSTER)] = None,
    override: Annotated[list[str] | None, typer.Option(
        "--override", metavar="K=V", help="A server.properties key for every broker.",
        rich_help_panel=CLUSTER)] = None,
    bootstrap: Annotated[str | None, typer.Option(
        metavar="HOST:PORT", help="Test this existing cluster instead (no faults).",
        rich_help_panel=CLUSTER)] = None,
    workload: Annotated[str, typer.Option(
        metavar="NAME", help="queue or register.", rich_help_panel=WORKLOAD)] = "queue",
    time_limit: Annotated[float, typer.Option(
        "--time-limit", metavar="SECONDS", help="Length of the main phase.",
        rich_help_panel=WORKLOAD)] = 40.0,
    seed: Annotated[int | None, typer.Option(
        metavar="N", help="Seeds the workload and faults (default: random).",
        rich_help_panel=WORKLOAD)] = None,
    acks: Annotated[str, typer.Option(
        metavar="ACKS", help="Producer acks: all, 1 or 0.", rich_help_panel=WORKLOAD)] = "all",
    idempotence: Annotated[bool, typer.Option(
        "--idempotence/--no-idempotence", metavar="", help="Idempotent producers.",
        rich_help_panel=WORKLOAD)] = True,
    concurrency: Annotated[int, typer.Option(
        metavar="N", help="Client workers.", rich_help_panel=WORKLOAD)] = 4,
    rate: Annotated[float, typer.Option(
        metavar="OPS", help="Ops per second, all workers.", rich_help_panel=WORKLOAD)] = 60.0,
    sub_via: Annotated[str, typer.Option(
        metavar="HOW", help="assign, subscribe or assign,subscribe.",
        rich_help_panel=WORKLOAD)] = "assign",
    crash_clients: Annotated[bool, typer.Option(
        "--crash-clients", metavar="", help="Crash clients now and then.",
        rich_help_panel=WORKLOAD)] = False,
    nemesis: Annotated[str, typer.Option(
        metavar="LIST", help="Fault kinds, comma list (below).",
        rich_help_panel=FAULTS)] = "standard",
    nemesis_interval: Annotated[float, typer.Option(
        metavar="SECONDS", help="Time between faults.", rich_help_panel=FAULTS)] = 8.0,
    rotate: Annotated[float | None, typer.Option(
        metavar="SECONDS", help="Rotate the fault kinds this often.",
        rich_help_panel=FAULTS)] = None,
    target_leader: Annotated[bool, typer.Option(
        "--target-leader", metavar="", help="Aim faults at the first key's leader.",
        rich_help_panel=FAULTS)] = False,
    nemesis_targets: Annotated[str, typer.Option(
        "--nemesis-targets", metavar="LIST", help="Which nodes node faults hit (below).",
        rich_help_panel=FAULTS)] = "",
    scenario: Annotated[str | None, typer.Option(
        metavar="NAME", help="A scripted nemesis instead (below).",
        rich_help_panel=FAULTS)] = None,
    name: Annotated[str, typer.Option(
        metavar="NAME", help="Run name: store/NAME/TIME/.", rich_help_panel=OUTPUT)] = "queue",
    store: Annotated[Path, typer.Option(
        metavar="DIR", help="Where run directories go.", rich_help_panel=OUTPUT)
    ] = Path("store"),
    runtime: Annotated[str, typer.Option(
        metavar="NAME", help="local (127.0.0.x processes) or docker.",
        rich_help_panel=CLUSTER)] = "local",
    recipe: Annotated[Path | None, typer.Option(
        "--recipe", metavar="FILE", help="docker: the brokers' node recipe (docker/recipes/).",
        rich_help_panel=CLUSTER)] = None,
    docker_pause: Annotated[str, typer.Option(
        "--docker-pause", metavar="HOW", help="docker: pause by freeze (docker pause) or "
        "sigstop (the broker process).", rich_help_panel=FAULTS)] = "freeze",
    repeat: Annotated[int, typer.Option(
        metavar="K", help="K campaigns in a row, seed +1 each (for hiwater analyze).",
        rich_help_panel=OUTPUT)] = 1,
    junit: Annotated[Path | None, typer.Option(
        "--junit", metavar="FILE", help="Also write the results as JUnit XML (for CI).",
        rich_help_panel=OUTPUT)] = None,
    harness: Annotated[str, typer.Option(
        "--harness", metavar="WHERE", help="docker: where the harness runs: host, or "
        "container (on the run's network; the host needs only Docker).",
        rich_help_panel=CLUSTER)] = "host",
) -> None:
    """Run a Jepsen-style campaign on a local cluster.

    Starts ZooKeeper and brokers on 127.0.0.x, runs real Kafka clients
    under faults, heals, reads everything back, checks the history and
    writes store/NAME/TIME/report.html (client libraries' logs go to
    logs/clients.log there)."""
    from harness.campaign import EXIT_ERROR, CampaignOptions, ProgressSample, run_campaign
    from harness.preflight import check_bootstrap_reachable, check_zookeeper
    from harness.report.progress import Progress

    try:
        if repeat < 1:
            raise ValueError(f"--repeat must be at least 1; got {repeat}")
        if junit is not None and junit.is_dir():
            raise ValueError(f"--junit {junit}: is a directory")
        for o in override or []:
            if "=" not in o or not o.split("=", 1)[0].strip():
                raise ValueError(f"--override needs key=value; got {o!r}")
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
            bootstrap=bootstrap, store=store, runtime=runtime, recipe=recipe,
            docker_pause=docker_pause)
        # what the values alone cannot tell; all before anything starts (issue #16)
        if "leader" in opts.nemesis_targets and not opts.target_leader:
            raise ValueError("--nemesis-targets leader needs --target-leader")
        if harness not in ("host", "container"):
            raise ValueError(f"--harness must be host or container; got {harness!r}")
        if harness == "container" and (opts.runtime != "docker" or opts.bootstrap):
            raise ValueError("--harness container needs --runtime docker (and no --bootstrap)")
        if harness == "container" and os.environ.get("HIWATER_HARNESS_CONTAINER"):
            raise ValueError("--harness container: this is the harness container already")
        if opts.runtime == "docker" and opts.bootstrap is None:
            from harness.runtime.docker import engine_unavailable_reason

            if (reason := engine_unavailable_reason()) is not None:
                raise ValueError(reason)
            _check_recipe_image(opts.recipe)
        elif opts.bootstrap is None:
            check_zookeeper()
        else:
            check_bootstrap_reachable(opts.bootstrap)
    except ValueError as e:
        typer.echo(f"hiwater campaign: {e}", err=True)
        raise typer.Exit(EXIT_ERROR) from None
    if harness == "container":
        raise typer.Exit(_campaign_in_container(ctx, opts.store, junit, recipe))
    faults = opts.scenario or ",".join(opts.nemesis)
    base = opts.seed if opts.seed is not None else random.randrange(1 << 31)
    codes = []
    junit_runs: list[tuple[Path | None, dict[str, object]]] = []
    for i in range(max(1, repeat)):
        if repeat > 1:
            opts = dataclasses.replace(opts, seed=base + i)
        with Progress(opts.time_limit_s, title=f"{opts.name} / {faults}") as progress:
            def show(s: ProgressSample, p: Progress = progress) -> None:
                p.update(s["counts"], nemesis_state=s["nemesis"],
                         client_errors=s["client_errors"])

            result = run_campaign(opts, progress=show)
        typer.echo(f"{result.verdict.upper()}: {result.run_dir / 'report.html'}")
        if result.bad:
            typer.echo(f"anomalies outside the policy: {', '.join(result.bad)}")
        if "error" in result.results:
            typer.echo(f"error: {result.results['error']}", err=True)
        codes.append(result.exit_code)
        if junit is not None:  # rewritten after each run: a cut-short --repeat keeps its runs
            from harness.junit import write_junit

            junit_runs.append((result.run_dir, result.results))
            write_junit(junit, junit_runs)
    raise typer.Exit(max(codes))


def _check_recipe_image(path: Path | None) -> None:
    """A recipe's own image must be on this machine (no registry is assumed): said before a
    run directory exists, not as the run's error after the network and ZooKeeper started."""
    if path is None:
        return
    from harness.runtime.docker import image_exists
    from harness.runtime.recipe import load_recipe

    r = load_recipe(path)
    if not r.builtin_image and not image_exists(r.image):
        raise ValueError(f"recipe {r.name}: image {r.image} is not on this machine "
                         "(docker load or docker pull it first)")


def _campaign_in_container(ctx: typer.Context, store: Path, junit: Path | None,
                           recipe: Path | None) -> int:
    """`--harness container`: the same campaign (the options given on the command line, the
    paths made absolute) in a harness container (harness/runtime/harness_container.py)."""
    from typer._click.core import ParameterSource

    from harness.runtime.docker import DockerError
    from harness.runtime.harness_container import run_in_container

    store = store.resolve()
    junit = junit.resolve() if junit else None
    recipe = recipe.resolve() if recipe else None
    paths = {"store": store, "junit": junit, "recipe": recipe}
    args: list[str] = ["--store", str(store)]
    for p in ctx.command.params:
        if (p.name in ("harness", "store") or not p.opts or p.name is None
                or ctx.get_parameter_source(p.name) != ParameterSource.COMMANDLINE):
            continue
        v = paths.get(p.name) or ctx.params[p.name]
        for item in v if isinstance(v, list) else [v]:
            if isinstance(item, bool):
                args += [p.opts[0]] if item else list(p.secondary_opts[:1])
            else:
                args += [p.opts[0], str(item)]
    rw = [store] + ([junit.parent] if junit else [])
    ro = [recipe.parent] if recipe else []
    try:
        return run_in_container(args, rw, ro, log=lambda m: typer.echo(m, err=True))
    except DockerError as e:
        typer.echo(f"hiwater campaign: {e}", err=True)
        return EXIT_BAD_INPUT


@app.command("report")
def report_cmd(
    runs: Annotated[list[Path] | None, typer.Argument(
        metavar="RUN_DIR", help="Run directories (default: store/latest).",
        show_default=False)] = None,
    index: Annotated[Path | None, typer.Option(
        metavar="STORE", help="Also write STORE/index.html of every run.")] = None,
) -> None:
    """Render a run's report.html again and print where it is.

    With no RUN_DIR, the last campaign's (store/latest). Open the page in a
    browser: verdict, timeline with faults, anomalies with their ops."""
    from harness.report import render, render_index

    if index is not None and not index.is_dir():
        typer.echo(f"hiwater report: no store directory {index}", err=True)
        raise typer.Exit(3)
    dirs = list(runs or ([] if index is not None else [Path("store/latest")]))
    for d in dirs:
        if not (d / "results.json").is_file():
            typer.echo(f"hiwater report: {d} is not a run directory (no results.json)",
                       err=True)
            raise typer.Exit(3)
    for d in dirs:
        typer.echo(render(d.resolve()))
    if index is not None:
        typer.echo(render_index(index))


@app.command("broker", rich_help_panel=MORE)
def broker_cmd(
    config: Annotated[Path, typer.Option("--config", help="A Kafka server.properties file.")],
    override: Annotated[list[str] | None, typer.Option(
        "--override", help="key=value, applied over the file (repeatable).")] = None,
) -> None:
    """Run one broker until SIGTERM/SIGINT.

    Exit 3: bad input (configuration, listener port in use, ZooKeeper
    unreachable, a log dir of another broker or cluster); 4: a fatal
    error; 5: a log dir it cannot use."""
    from broker.runtime.main import EXIT_BAD_INPUT
    from broker.runtime.main import main as broker_main

    pairs: dict[str, str] = {}
    for item in override or []:
        if "=" not in item:
            typer.echo(f"hiwater broker: --override needs key=value, got {item!r}", err=True)
            raise typer.Exit(EXIT_BAD_INPUT)
        k, v = item.split("=", 1)
        pairs[k.strip()] = v.strip()
    raise typer.Exit(broker_main(str(config), pairs))


docker_app = typer.Typer(no_args_is_help=True, help="Images for `campaign --runtime docker`.")
app.add_typer(docker_app, name="docker", rich_help_panel=MORE)


@docker_app.command("build")
def docker_build(
    base: Annotated[str | None, typer.Option(
        help="Base image (debian:bookworm-slim with a registry; default $HIWATER_DOCKER_BASE, "
        "else hiwater/base:bookworm, debootstrapped).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Rebuild without the cache.")] = False,
    harness: Annotated[bool, typer.Option(
        "--harness", help="Also the harness image (campaign --harness container).")] = False,
) -> None:
    """Build the base image (debootstrap) and the node image, each only when missing.
    Exit 3 when no Docker engine is reachable or a build fails."""
    from harness.runtime.docker import DockerError, build_images
    from harness.runtime.harness_container import build_harness_image

    try:
        node = build_images(base, force=force, log=typer.echo)
        typer.echo(node)
        if harness:
            typer.echo(build_harness_image(node, force=force, log=typer.echo))
    except DockerError as e:
        typer.echo(f"hiwater docker build: {e}", err=True)
        raise typer.Exit(3) from None


CLUSTER_DIR = Path("store/cluster")
cluster_app = typer.Typer(no_args_is_help=True, help="A local cluster: ZooKeeper + N brokers.")
app.add_typer(cluster_app, name="cluster", rich_help_panel=MORE)


@cluster_app.command("up")
def cluster_up(
    brokers: Annotated[int, typer.Option("--brokers", help="Number of brokers (ids 1..N).")] = 3,
    directory: Annotated[Path, typer.Option("--dir", help="Data and logs.")] = CLUSTER_DIR,
    override: Annotated[list[str] | None, typer.Option(
        "--override", help="key=value for every broker.")] = None,
) -> None:
    """Start ZooKeeper and N brokers on 127.0.0.x.

    Prints the bootstrap servers once the cluster serves Metadata and
    leaves it running (hiwater cluster down stops it)."""
    from broker.runtime.cluster import STATE_FILE, ClusterError, LocalCluster
    from broker.runtime.zkserver import ZooKeeperError
    from harness.preflight import MAX_BROKERS, check_local_overrides, check_zookeeper

    try:
        if (directory / STATE_FILE).exists():
            raise ValueError(f"a cluster is already recorded in {directory}: run `hiwater "
                             f"cluster down --dir {directory}` first")
        if directory.exists() and not directory.is_dir():
            raise ValueError(f"--dir {directory} exists and is not a directory")
        if not 1 <= brokers <= MAX_BROKERS:
            raise ValueError(f"--brokers must be 1..{MAX_BROKERS}; got {brokers}")
        bad = [item for item in override or [] if "=" not in item]
        if bad:
            raise ValueError(f"--override needs key=value; got {bad[0]!r}")
        check_local_overrides(dict(item.split("=", 1) for item in override or []))
        check_zookeeper()
    except ValueError as e:
        typer.echo(f"hiwater cluster up: {e}", err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    pairs = dict(item.split("=", 1) for item in override or [])
    cluster = LocalCluster(directory, brokers, pairs)
    try:
        cluster.start()
    except (ClusterError, ZooKeeperError) as e:
        # one line: what failed first (the broker's own line, not its whole log tail)
        typer.echo(f"hiwater cluster up: did not start: {_first_line(e)}", err=True)
        raise typer.Exit(1) from None
    cluster.save_state()
    typer.echo(cluster.bootstrap)


@cluster_app.command("down")
def cluster_down(
    directory: Annotated[Path, typer.Option("--dir", help="As given to up.")] = CLUSTER_DIR,
) -> None:
    """Stop what cluster up started (by the recorded PIDs)."""
    from broker.runtime.cluster import ClusterError, down

    try:
        for line in down(directory):
            typer.echo(f"stopped {line}")
    except ClusterError as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(1) from None


def _first_line(e: BaseException) -> str:
    lines = [ln for ln in str(e).splitlines() if ln.strip()]
    said = [ln for ln in lines if ln.startswith("hiwater ")]  # a broker's own one line
    return (said or lines or [type(e).__name__])[-1 if said else 0].strip()


@app.command("sim", rich_help_panel=MORE)
def sim(
    seed: Annotated[int | None, typer.Option(help="One seed (the first, with --swarm).")] = None,
    seeds: Annotated[str | None, typer.Option(metavar="A..B", help="Seeds A to B.")] = None,
    swarm: Annotated[int | None, typer.Option(metavar="K", help="K seeds from --seed.")] = None,
    bug: Annotated[str | None, typer.Option(help="A historic-bug switch (spec bugs).")] = None,
    nodes: Annotated[int, typer.Option(help="Brokers.")] = 3,
    time_s: Annotated[float, typer.Option("--time", metavar="SIM_SECONDS",
                                          help="Safety phase, simulated seconds.")] = 20.0,
    liveness: Annotated[float, typer.Option(metavar="SIM_SECONDS",
                                            help="Bound on convergence after healing.")] = 60.0,
    no_swarm: Annotated[bool, typer.Option("--no-swarm",
                                           help="Every fault kind on (no draw).")] = False,
    faults: Annotated[str | None, typer.Option(metavar="KINDS",
                                               help="Fault kinds the seeds draw from.")] = None,
    workload: Annotated[str, typer.Option(
        metavar="NAME", help="queue, register, or any (each seed draws one).")] = "any",
    workers: Annotated[int | None, typer.Option(help="Processes (default: cores).")] = None,
    store: Annotated[Path, typer.Option(help="Where failing seeds' runs go.")] = Path(
        "store/sim"),
    replay: Annotated[Path | None, typer.Option(metavar="TRACE",
                                                help="Replay a trace bit for bit.")] = None,
) -> int:
    """Deterministic simulation of the whole cluster (harness/sim).

    The real broker code of N nodes on simulated time, network, ZooKeeper
    and disks, driven by one seed; swarm testing draws each seed's faults.

    Exit 0: every seed passed; 1: a seed failed (printed with its seed,
    options, first broken invariant or anomaly, and a replayable trace);
    3: bad input."""
    from harness.sim.cli import sim_command

    rc = sim_command(seed=seed, seeds=seeds, swarm=swarm, bug=bug, nodes=nodes, time_s=time_s,
                     liveness_s=liveness, no_swarm=no_swarm, faults=faults, workers=workers,
                     store=store, replay=replay, echo=typer.echo, workload=workload)
    raise typer.Exit(rc)


def main() -> None:
    from harness.clients.logs import quiet

    quiet()  # client libraries' logs never reach the terminal (a campaign files them)
    args = sys.argv[1:]
    sys.exit(_run([a for a in args if a != "--debug"], debug="--debug" in args))


def _run(args: list[str], debug: bool = False) -> int:
    """The app, with a command-line mistake (`--rf x`, an unknown option) reported in one
    line instead of a boxed panel, exit 3 (bad input) for every command; an unexpected
    error is one line too, exit 3, and its traceback only with `--debug`."""
    from typer import Abort
    from typer._click.exceptions import ClickException, UsageError

    try:
        rv = app(args, prog_name="hiwater", standalone_mode=False)
    except UsageError as e:
        if type(e).__name__ == "NoArgsIsHelpError":  # the help is already printed
            return e.exit_code
        path = e.ctx.command_path if e.ctx is not None else "hiwater"
        typer.echo(f"{path}: {e.format_message()} (see {path} --help)", err=True)
        return EXIT_BAD_INPUT
    except ClickException as e:
        e.show()
        return e.exit_code
    except Abort:
        typer.echo("Aborted!", err=True)
        return 1
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        return 130
    except Exception as e:
        if debug:
            raise
        command = " ".join(a for a in args[:2] if not a.startswith("-"))
        typer.echo(f"hiwater {command}: {type(e).__name__}: {_first_line(e)} "
                   "(--debug shows the traceback)", err=True)
        return EXIT_BAD_INPUT
    return rv if isinstance(rv, int) else 0


EXIT_BAD_INPUT = 3
