"""Tiny integer rules of the protocol.

Each function here is small, total and side-effect free, so that `spec/z3` can encode it
symbolically and prove its properties, while Hypothesis keeps the encoding equal to the code.
The replica and controller machines call these functions instead of inlining the arithmetic.
"""

from core.rules.acks import acks_all_admissible, acks_all_satisfied
from core.rules.assignment import assign_replicas, choose_log_dir
from core.rules.election import (
    controlled_shutdown_leader,
    offline_leader,
    preferred_leader,
)
from core.rules.epochs import EpochEntry, assign_epoch, end_offset_for_epoch, truncate_epochs
from core.rules.hw import high_watermark
from core.rules.isr import can_expand_isr, is_out_of_sync
from core.rules.truncation import divergence_offset

__all__ = [
    "EpochEntry",
    "acks_all_admissible",
    "acks_all_satisfied",
    "assign_epoch",
    "assign_replicas",
    "can_expand_isr",
    "choose_log_dir",
    "controlled_shutdown_leader",
    "divergence_offset",
    "end_offset_for_epoch",
    "high_watermark",
    "is_out_of_sync",
    "offline_leader",
    "preferred_leader",
    "truncate_epochs",
]
