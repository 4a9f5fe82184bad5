"""Deterministic simulation of a whole hiwater cluster (DESIGN.md's third driver).

N brokers run in one process: each is the pure core inside the real effect interpreter
(`broker.runtime.node.Node`) over the real segment store (`broker.store`) on `SimFS`, wired
to a simulated clock, network and ZooKeeper through the interpreter's ports. Clients run the
queue workload's operations and write a Jepsen history that `harness.checkers` judges
unchanged; `spec.invariants` run after every event on the cluster projected into a
`spec.world.World`. One `random.Random(seed)` drives everything.

    from harness.sim.run import SimOptions, run_seed
    result = run_seed(SimOptions(seed=7))
"""
