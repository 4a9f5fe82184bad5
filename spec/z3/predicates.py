"""State predicates shared by the BMC and the inductive proof: who presumes leadership,
who follows whom in the same epoch, who is the true (quorum) leader. Both encodings name
their variables the same way (`ldr.r`, `ep.r`, `q_ldr`, `q_ep`)."""

from __future__ import annotations

from typing import Any

import z3

from spec.z3.rules import ZBool


class LeadershipPredicates:
    def __getitem__(self, name: str) -> Any:
        raise KeyError(name)  # overridden by each state class

    def presumes(self, r: int) -> ZBool:
        return self[f"ldr.{r}"] == r

    def follows_in_epoch(self, leader: int, f: int) -> ZBool:
        return z3.And(self.presumes(leader), self[f"ldr.{f}"] == leader,
                      self[f"ep.{f}"] == self[f"ep.{leader}"])

    def true_leader(self, r: int) -> ZBool:
        return z3.And(self["q_ldr"] == r, self.presumes(r), self[f"ep.{r}"] == self["q_ep"])
