"""Z3 side of hiwater's formal checks.

* `spec.z3.rules`: Z3 encodings of `core/rules` (generic over Int and bit-vector terms).
* `spec.z3.proofs`: properties of those encodings proved for unbounded integers;
  `run_proofs() -> list[ProofResult]`, `format_results(results) -> str`, `main()`.
* `spec.z3.bmc`: bounded model checking of the protocol's transition relation (HK `Kip320.tla`
  refined with the rule encodings); `check(BmcConfig, depth, prefix) -> BmcResult`,
  `format_result`, `scenarios()`, `main()`.
* `spec.z3.inductive`: inductive-invariant attempt for StrongIsr with unbounded offsets;
  `attempt_inductive_proof(replicas) -> InductiveReport` (`.format()`, `.by_kind()`).
"""
