"""When faults happen: generators of `Step(delay_s, fault)`, pure functions of a seeded
`random.Random` (Jepsen `generator`: `stagger`, `flip-flop`, `mix`, `any`, rotating mixes).

A generator is an iterator of steps; `delay_s` is the wait since the previous step of the same
iterator. Generators may be infinite: the runner stops at its deadline, `plan` at a horizon.

- `flip_flop(starts, stop, interval_s, rng)`: start, stop, start, stop, ... each after a uniform
  delay in [0, 2 × interval) (`gen/stagger` over `gen/flip-flop`); `starts` is one fault or a
  sequence to draw from uniformly (`gen/mix`);
- `repeat(faults, interval_s, rng)`: a fault drawn from `faults` after each staggered delay;
- `merge(generators)`: all of them on one timeline, overlapping (`gen/any`);
- `rotating(choices, period_s, rng, quiet_probability)`: every period a random non-empty
  subset of the `choices` (or, with `quiet_probability`, none: a fault-free period) runs,
  merged, for the period, then their healing final steps (Bufstream's and NATS's
  `package-gen`).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from nemesis.faults import Fault

MAX_STEPS = 1_000_000  # a bound on how many steps `plan` expands


@dataclass(frozen=True, slots=True)
class Step:
    delay_s: float
    fault: Fault


Generator = Iterator[Step]
GeneratorFactory = Callable[[random.Random], Generator]


def _pick(faults: Fault | Sequence[Fault], rng: random.Random) -> Fault:
    if isinstance(faults, Fault):
        return faults
    if not faults:
        raise ValueError("no faults to choose from")
    return faults[rng.randrange(len(faults))]


def stagger(interval_s: float, rng: random.Random) -> float:
    return rng.uniform(0.0, 2.0 * interval_s)


def flip_flop(starts: Fault | Sequence[Fault], stop: Fault, interval_s: float,
              rng: random.Random) -> Generator:
    if interval_s <= 0:
        raise ValueError("interval_s must be positive")
    while True:
        yield Step(stagger(interval_s, rng), _pick(starts, rng))
        yield Step(stagger(interval_s, rng), stop)


def repeat(faults: Fault | Sequence[Fault], interval_s: float, rng: random.Random) -> Generator:
    if interval_s <= 0:
        raise ValueError("interval_s must be positive")
    while True:
        yield Step(stagger(interval_s, rng), _pick(faults, rng))


def sequence(steps: Iterable[Step]) -> Generator:
    """A fixed script (e.g. NATS's pause-kill scenario)."""
    yield from steps


def merge(generators: Sequence[Generator]) -> Generator:
    """Interleave by absolute time (ties: the earlier generator first)."""
    heap: list[tuple[float, int, Step]] = []
    for i, g in enumerate(generators):
        s = next(g, None)
        if s is not None:
            heap.append((s.delay_s, i, s))
    heapq.heapify(heap)
    now = 0.0
    while heap:
        at, i, s = heapq.heappop(heap)
        yield Step(max(0.0, at - now), s.fault)
        now = at
        nxt = next(generators[i], None)
        if nxt is not None:
            heapq.heappush(heap, (at + nxt.delay_s, i, nxt))


@dataclass(frozen=True)
class Choice:
    """One thing `rotating` may switch on for a period: a generator factory and its finals."""

    name: str
    generator: GeneratorFactory
    final: tuple[Fault, ...]


def rotating(choices: Sequence[Choice], period_s: float, rng: random.Random,
             quiet_probability: float = 0.25) -> Generator:
    if period_s <= 0:
        raise ValueError("period_s must be positive")
    if not choices or quiet_probability >= 1.0:
        return
    carry = 0.0  # time of quiet periods (and period tails) not yet waited
    while True:
        if rng.random() < quiet_probability:
            chosen: list[Choice] = []
        else:
            k = rng.randint(1, len(choices))
            chosen = [choices[i] for i in sorted(rng.sample(range(len(choices)), k))]
        elapsed = 0.0
        if chosen:
            sub = merge([c.generator(random.Random(rng.getrandbits(64))) for c in chosen])
            for step in sub:
                if elapsed + step.delay_s >= period_s:
                    break
                elapsed += step.delay_s
                yield Step(step.delay_s + carry, step.fault)
                carry = 0.0
        finals: list[Fault] = []
        for c in chosen:
            for f in c.final:
                if f not in finals:
                    finals.append(f)
        carry += period_s - elapsed
        for f in finals:
            yield Step(carry, f)
            carry = 0.0


def plan(generator: Generator, horizon_s: float) -> list[tuple[float, Fault]]:
    """(absolute time, fault) of every step before `horizon_s` (for tests and dry runs)."""
    out: list[tuple[float, Fault]] = []
    t = 0.0
    for i, step in enumerate(generator):
        if i >= MAX_STEPS:
            raise ValueError(f"more than {MAX_STEPS} steps before {horizon_s}s")
        t += step.delay_s
        if t >= horizon_s:
            break
        out.append((round(t, 9), step.fault))
    return out
