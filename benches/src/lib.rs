//! Shared helpers for the NoKV criterion benchmarks (see `benches/`).
