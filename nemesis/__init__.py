"""The nemesis: faults as data, schedules, packages, and a runner that applies them to a
cluster and records them (Jepsen's `info` pairs of process "nemesis").

- `nemesis.port`: what the nemesis needs from the world: `Cluster` (a Protocol of the fault
  operations, which the harness's runtimes satisfy), its errors, `Record` (the callback the
  ops go to) and `Clock` (the time it waits on: `WALL_CLOCK`, or a runtime's own, e.g. the
  simulator's). The nemesis imports nothing of the harness; the harness depends on it.

- `nemesis.faults`: `PartitionNetwork`, `HealNetwork`, `KillNode`, `StartNode`, `PauseNode`,
  `ResumeNode`, `WipeDisk`, `LoseUnflushed`, `CorruptSegment`, `CleanRestart`, `Toxic`,
  `SlowLink`, `RemoveToxics`, `HealAll`; node targets (`"one"`, `"majority"`, `"leader"`,
  `LeaderOf(topic, partition)`, `"controller"`, ...);
- `nemesis.grudges`: partition shapes; `nemesis.targets`: resolving targets;
- `nemesis.schedule`: `flip_flop`, `repeat`, `merge`, `rotating`, `plan`;
- `nemesis.packages`: `Package`, the standard packages, `compose`, `rotating_package`,
  `package_for`;
- `nemesis.executor`: `execute` (one fault on a runtime), `heal_all`;
- `nemesis.runner`: `run_nemesis`, `heal_all` (recorded);
- `nemesis.toxiproxy`: the project's Toxiproxy-compatible proxy.
"""
