"""Workloads that drive a live cluster through real Kafka clients and record Jepsen
histories: `queue` (jepsen.tests.kafka) and `register` (per-key registers over a compacted
topic, for the linearizability checker). `recorder.Recorder` is the shared history sink."""
