//! Prometheus text-format metrics of one server (`GET /metrics`, exposition format 0.0.4).
//!
//! - `nokv_http_requests_total{route,status}` — requests answered, by route template and status;
//! - `nokv_http_request_duration_seconds{route}` — latency histogram (seconds, from the request
//!   head to the response head; streaming bodies continue after it);
//! - `nokv_http_requests_in_flight` — requests being handled now;
//! - `nokv_group_commit_groups_total`, `nokv_group_commit_records_total`,
//!   `nokv_group_commit_size{le}` — holt's group commits (records per fdatasync) as a cumulative
//!   histogram over the power-of-two buckets holt counts;
//! - `nokv_commits_total`, `nokv_wal_syncs_total`, `nokv_commit_version`, `nokv_history_floor`,
//!   `nokv_checkpoints_total`, `nokv_checkpoint_failures_total` — engine counters;
//! - `nokv_open_operations{kind="publish"}` — non-terminal Publish operations (the ledger's
//!   pending-operation registry);
//! - `nokv_background_runs_total{task,outcome}` — reaper, GC and recovery passes;
//! - `nokv_audit_records_total`, `nokv_audit_syncs_total` — audit records this server wrote and
//!   the `fdatasync` calls they took (concurrent records share one).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds (seconds) of the latency histogram buckets.
const LATENCY_BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

#[derive(Default, Clone)]
struct Histogram {
    buckets: [u64; LATENCY_BUCKETS.len()],
    count: u64,
    sum_seconds: f64,
}

/// Request and background counters of one server.
#[derive(Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(String, u16), u64>>,
    latency: Mutex<BTreeMap<String, Histogram>>,
    in_flight: AtomicU64,
    background: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
}

/// Decrements the in-flight gauge when dropped.
pub(crate) struct InFlight<'a>(&'a Metrics);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Metrics {
    /// Counts a request as in flight until the guard is dropped.
    pub(crate) fn enter(&self) -> InFlight<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(self)
    }

    /// Requests being handled now.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Records one answered request.
    pub(crate) fn observe(&self, route: &str, status: u16, elapsed: Duration) {
        let mut r = self.requests.lock().unwrap_or_else(|p| p.into_inner());
        *r.entry((route.to_string(), status)).or_default() += 1;
        drop(r);
        let secs = elapsed.as_secs_f64();
        let mut l = self.latency.lock().unwrap_or_else(|p| p.into_inner());
        let h = l.entry(route.to_string()).or_default();
        for (i, le) in LATENCY_BUCKETS.iter().enumerate() {
            if secs <= *le {
                h.buckets[i] += 1;
            }
        }
        h.count += 1;
        h.sum_seconds += secs;
    }

    /// Records one background pass (`task`: `reaper` | `gc` | `recovery`; `outcome`: `ok` | `error`).
    pub(crate) fn background(&self, task: &'static str, outcome: &'static str) {
        let mut b = self.background.lock().unwrap_or_else(|p| p.into_inner());
        *b.entry((task, outcome)).or_default() += 1;
    }

    /// The exposition text: these counters plus the engine's (`stats`) and the open-operation
    /// count (`open_publish`, `None` when it could not be read).
    pub(crate) fn render(
        &self,
        stats: Option<&holt::Stats>,
        open_publish: Option<usize>,
        audit: nokv::access::AuditCounters,
    ) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP nokv_http_requests_total Requests answered, by route and HTTP status."
        );
        let _ = writeln!(out, "# TYPE nokv_http_requests_total counter");
        for ((route, status), n) in self
            .requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            let _ = writeln!(
                out,
                "nokv_http_requests_total{{route=\"{}\",status=\"{status}\"}} {n}",
                escape(route)
            );
        }
        let _ = writeln!(
            out,
            "# HELP nokv_http_request_duration_seconds Time to the response head, by route."
        );
        let _ = writeln!(out, "# TYPE nokv_http_request_duration_seconds histogram");
        for (route, h) in self
            .latency
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            let route = escape(route);
            for (i, le) in LATENCY_BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "nokv_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"{le}\"}} {}",
                    h.buckets[i]
                );
            }
            let _ = writeln!(
                out,
                "nokv_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(
                out,
                "nokv_http_request_duration_seconds_sum{{route=\"{route}\"}} {}",
                h.sum_seconds
            );
            let _ = writeln!(
                out,
                "nokv_http_request_duration_seconds_count{{route=\"{route}\"}} {}",
                h.count
            );
        }
        let _ = writeln!(
            out,
            "# HELP nokv_http_requests_in_flight Requests being handled now."
        );
        let _ = writeln!(out, "# TYPE nokv_http_requests_in_flight gauge");
        let _ = writeln!(out, "nokv_http_requests_in_flight {}", self.in_flight());

        // The holt engine counters exist only for a holt-backed shard.
        if let Some(stats) = stats {
            let g = &stats.wal_groups;
            let _ = writeln!(
                out,
                "# HELP nokv_group_commit_size WAL records per group commit (one fdatasync each)."
            );
            let _ = writeln!(out, "# TYPE nokv_group_commit_size histogram");
            let mut cumulative = 0u64;
            for (i, n) in g.histogram.iter().enumerate() {
                cumulative += n;
                if i + 1 < g.histogram.len() {
                    let le = (1u64 << (i + 1)) - 1;
                    let _ = writeln!(
                        out,
                        "nokv_group_commit_size_bucket{{le=\"{le}\"}} {cumulative}"
                    );
                }
            }
            let _ = writeln!(
                out,
                "nokv_group_commit_size_bucket{{le=\"+Inf\"}} {}",
                g.groups
            );
            let _ = writeln!(out, "nokv_group_commit_size_sum {}", g.records);
            let _ = writeln!(out, "nokv_group_commit_size_count {}", g.groups);
            let counters = [
                (
                    "nokv_group_commit_groups_total",
                    "Group commits written.",
                    g.groups,
                ),
                (
                    "nokv_group_commit_records_total",
                    "WAL records covered by group commits.",
                    g.records,
                ),
                (
                    "nokv_commits_total",
                    "Metadata batches committed since start.",
                    stats.commits,
                ),
                (
                    "nokv_wal_syncs_total",
                    "WAL fdatasync calls since start.",
                    stats.wal_syncs,
                ),
                (
                    "nokv_checkpoints_total",
                    "Checkpoints installed since start.",
                    stats.checkpoints,
                ),
                (
                    "nokv_checkpoint_failures_total",
                    "Failed background checkpoints since start.",
                    stats.checkpoint_failures,
                ),
            ];
            for (name, help, v) in counters {
                let _ = writeln!(out, "# HELP {name} {help}");
                let _ = writeln!(out, "# TYPE {name} counter");
                let _ = writeln!(out, "{name} {v}");
            }
            for (name, help, v) in [
                (
                    "nokv_commit_version",
                    "Last durable commit version.",
                    stats.version,
                ),
                (
                    "nokv_history_floor",
                    "MVCC history floor.",
                    stats.history_floor,
                ),
            ] {
                let _ = writeln!(out, "# HELP {name} {help}");
                let _ = writeln!(out, "# TYPE {name} gauge");
                let _ = writeln!(out, "{name} {v}");
            }
        }
        if let Some(n) = open_publish {
            let _ = writeln!(
                out,
                "# HELP nokv_open_operations Non-terminal durable operations."
            );
            let _ = writeln!(out, "# TYPE nokv_open_operations gauge");
            let _ = writeln!(out, "nokv_open_operations{{kind=\"publish\"}} {n}");
        }
        let _ = writeln!(
            out,
            "# HELP nokv_background_runs_total Background passes, by task and outcome."
        );
        let _ = writeln!(out, "# TYPE nokv_background_runs_total counter");
        for ((task, outcome), n) in self
            .background
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            let _ = writeln!(
                out,
                "nokv_background_runs_total{{task=\"{task}\",outcome=\"{outcome}\"}} {n}"
            );
        }
        for (name, help, v) in [
            (
                "nokv_audit_records_total",
                "Audit records written since start.",
                audit.records,
            ),
            (
                "nokv_audit_syncs_total",
                "Audit trail fdatasync calls since start.",
                audit.syncs,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} counter");
            let _ = writeln!(out, "{name} {v}");
        }
        out
    }
}

/// Escapes a label value (backslash, quote, newline).
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
