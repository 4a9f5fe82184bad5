"""A campaign's results as JUnit XML (`hiwater campaign --junit FILE`), the format CI systems
show as test results.

One `<testsuite>` per run (`--repeat` makes several), named `hiwater.<run name>`, with the
run's seed, runtime, verdict and directory as properties, and these test cases:

- `checker.queue`, `checker.linearizable` (whichever ran): a `<failure>` per checker when it
  found anomalies outside the configuration's policy, its text each anomaly type's explanation
  (`harness.report.explain`) and a few of its examples; allowed anomalies go to system-out;
  an `<error>` when the checker could not decide (`unknown`);
- `workload.final-reads`: an `<error>` when the final reads could not reach every offset
  (the verdict is then unknown);
- `live-invariant.<name>` for every invariant the live probe checks (`LIVE_INVARIANTS`):
  a `<failure>` listing its violations;
- `campaign`: an `<error>` when the run itself failed (the cluster did not start, ...).

A test case holds at most one `<failure>` or `<error>` (the JUnit schema), so a checker's
anomaly types share one failure: its `type` attribute lists them.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# what harness.campaign.LiveProbe checks, one test case each
LIVE_INVARIANTS = ("high_watermark_le_log_end", "log_end_matches_disk",
                   "leader_epoch_monotonic", "controller_epoch_monotonic",
                   "single_leader_per_epoch", "probe_format")
EXAMPLES_MAX = 3
TEXT_MAX = 4000


def _short(x: Any, cap: int = 600) -> str:
    s = x if isinstance(x, str) else json.dumps(x, default=str, sort_keys=True)
    return s if len(s) <= cap else s[: cap - 1] + "…"


def _examples(found: Any) -> list[Any]:
    """A few examples of one anomaly type (the queue checker condenses them to
    {"count", "errs"} or a list)."""
    if isinstance(found, Mapping) and "errs" in found:
        found = found["errs"]
    if isinstance(found, Mapping):
        return [found]
    if isinstance(found, Sequence) and not isinstance(found, str):
        return list(found)[:EXAMPLES_MAX]
    return [found]


def _explained(name: str, found: Any) -> str:
    from harness.report.explain import explain

    e = explain(name)
    lines = [f"{name}: {e.title}", f"  what: {e.what}", f"  why: {e.why}"]
    for ex in _examples(found):
        lines.append(f"  e.g. {_short(ex)}")
    return "\n".join(lines)


def _case(suite: ET.Element, classname: str, name: str, time_s: float = 0.0) -> ET.Element:
    return ET.SubElement(suite, "testcase", classname=classname, name=name,
                         time=f"{time_s:.3f}")


def _fail(case: ET.Element, tag: str, type_: str, message: str, text: str) -> None:
    el = ET.SubElement(case, tag, type=type_, message=_short(message, 300))
    el.text = text[:TEXT_MAX]


def _queue_case(suite: ET.Element, q: Mapping[str, Any]) -> None:
    case = _case(suite, "checker", "queue")
    bad = list(q.get("bad_anomaly_types", []))
    anomalies = q.get("anomalies", {})
    allowed = [t for t in q.get("anomaly_types", []) if t not in bad]
    if bad:
        _fail(case, "failure", ",".join(bad),
              f"anomalies outside the policy: {', '.join(bad)}",
              "\n\n".join(_explained(t, anomalies.get(t)) for t in bad))
    elif q.get("valid?") == "unknown":
        _fail(case, "error", "unknown", "the queue checker could not decide", "")
    if allowed:
        ET.SubElement(case, "system-out").text = (
            "anomalies the policy allows: " + ", ".join(allowed))


def _linearizable_case(suite: ET.Element, lz: Mapping[str, Any]) -> None:
    case = _case(suite, "checker", "linearizable")
    valid = lz.get("valid?")
    if valid is False:
        failures = lz.get("failures", [])
        text = _explained("nonlinearizable", failures) + "\n" + "\n".join(
            str(v) for v in lz.get("verdicts", [])[:EXAMPLES_MAX])
        _fail(case, "failure", "nonlinearizable",
              f"{len(failures)} key(s) not linearizable", text)
    elif valid == "unknown":
        keys = lz.get("unknown_keys", [])
        _fail(case, "error", "unknown", f"undecided for {len(keys)} key(s)",
              _short(keys))


def _live_cases(suite: ET.Element, probes: Mapping[str, Any]) -> None:
    violations = list(probes.get("violations", []))
    names = list(LIVE_INVARIANTS) + sorted(
        {str(v.get("invariant")) for v in violations} - set(LIVE_INVARIANTS))
    for name in names:
        case = _case(suite, "live-invariant", name)
        mine = [v for v in violations if v.get("invariant") == name]
        if mine:
            _fail(case, "failure", name, f"{len(mine)} violation(s) of {name}",
                  "\n".join(_short(v) for v in mine[:20]))


def _suite(root: ET.Element, run_dir: Path | None, results: Mapping[str, Any]) -> None:
    opts = results.get("options", {})
    suite = ET.SubElement(root, "testsuite", name=f"hiwater.{opts.get('name', 'campaign')}")
    props = ET.SubElement(suite, "properties")
    for k, v in (("seed", results.get("seed")), ("runtime", opts.get("runtime")),
                 ("verdict", results.get("verdict")), ("exit_code", results.get("exit_code")),
                 ("run_dir", run_dir), ("nemesis", (results.get("nemesis") or {}).get(
                     "package"))):
        if v is not None:
            ET.SubElement(props, "property", name=k, value=str(v))
    campaign = _case(suite, "campaign", "run")
    if "error" in results:
        _fail(campaign, "error", "error", str(results["error"]),
              str(results.get("traceback", "")))
    if "queue" in results:
        _queue_case(suite, results["queue"])
    if "linearizable" in results:
        _linearizable_case(suite, results["linearizable"])
    workload = results.get("workload") or {}
    if "final_complete" in workload:
        case = _case(suite, "workload", "final-reads")
        if workload["final_complete"] is False:
            _fail(case, "error", "incomplete",
                  "the final reads could not reach every offset (verdict unknown)",
                  _short(workload.get("unreached"), TEXT_MAX))
    if "probes" in results:
        _live_cases(suite, results["probes"])
    cases = suite.findall("testcase")
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(sum(c.find("failure") is not None for c in cases)))
    suite.set("errors", str(sum(c.find("error") is not None for c in cases)))
    suite.set("skipped", "0")


def junit_xml(runs: Sequence[tuple[Path | None, Mapping[str, Any]]]) -> str:
    """The JUnit XML of (run dir, results.json contents) pairs."""
    root = ET.Element("testsuites", name="hiwater campaign")
    for run_dir, results in runs:
        _suite(root, run_dir, results)
    for attr in ("tests", "failures", "errors"):
        root.set(attr, str(sum(int(s.get(attr, "0")) for s in root)))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(path: Path, runs: Sequence[tuple[Path | None, Mapping[str, Any]]]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(junit_xml(runs), encoding="utf-8")
    tmp.replace(path)
