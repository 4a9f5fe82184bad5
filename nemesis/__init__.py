"""The nemesis: faults as data, schedules, packages, and a runner that applies them to a
`harness.runtime.Runtime` and records them in the history (process "nemesis", `info` pairs).

- `nemesis.faults`: `PartitionNetwork`, `HealNetwork`, `KillNode`, `StartNode`, `PauseNode`,
  `ResumeNode`, `WipeDisk`, `LoseUnflushed`, `CorruptSegment`, `CleanRestart`, `Toxic`,
  `SlowLink`, `RemoveToxics`, `HealAll`; node targets (`"one"`, `"majority"`, `"leader"`,
  `LeaderOf(topic, partition)`, `"controller"`, ...);
- `nemesis.grudges`: partition shapes; `nemesis.targets`: resolving targets;
- `nemesis.schedule`: `flip_flop`, `repeat`, `merge`, `rotating`, `plan`;
- `nemesis.packages`: `Package`, the standard packages, `compose`, `rotating_package`,
  `package_for`;
- `nemesis.executor`: `execute` (one fault on a runtime), `heal_all`;
- `nemesis.runner`: `run_nemesis`, `heal_all` (recorded), sinks;
- `nemesis.toxiproxy`: the project's Toxiproxy-compatible proxy.
"""
