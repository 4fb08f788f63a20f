//! Garbage-collection cost benchmark (issue 12): one `nokv::Client::gc` pass costs
//! O(candidates), not O(store) (docs/metadata-format.md, "Garbage Collection State Machine"; docs/design.md, "Safe
//! Object Lifetime"), and what one `nokv::Client::remove` costs.
//!
//! Two stores are built side by side on the local-directory object store with the default
//! durability (`Sync`: every metadata command waits for its WAL fdatasync):
//!
//! * `small` — `NOKV_BENCH_GC_LIVE` (default 1,000) untouched live publications;
//! * `large` — ten times as many.
//!
//! Each live publication is one real block object in the provider plus its published rows
//! (ArtifactRevision, one ArtifactManifest row, RevisionRef, PathCurrent, index rows), written by
//! `MetaShard::publish` after the block upload — the rows and objects `Client::put` leaves, without
//! its ledger commands (which only make loading slower). Both stores set
//! `history_retention_versions = 0`, so a removed revision is collectable by the next pass.
//!
//! Each round, for each store in turn (small, large — interleaved so load drift hits both):
//!
//! 1. untimed: `Client::put` of `NOKV_BENCH_GC_CANDIDATES` (default 64) new 1 KiB files, then
//!    `Client::remove_prefix` of their directory: the same number of collectable revisions
//!    (one own object each) in both stores;
//! 2. timed: one `Client::gc` pass, asserted to delete exactly those revisions and objects
//!    (the pass includes raising the history floor, the GcBarrier round a quiescent tip needs,
//!    claim / start / DELETE / Deleted commands per revision and the provider DELETEs);
//! 3. timed: one idle `Client::gc` pass (no candidate left);
//! 4. timed: `REMOVES_PER_ROUND` single-path `Client::remove` calls (each after an untimed put).
//!
//! The output gives per store the median and minimum of each measurement and the ratio
//! large/small of the medians. O(store) work would show as a ratio near 10; O(candidates) as a
//! ratio near 1.
//!
//! Run: `cargo bench -p nokv-benches --bench gc` (`NOKV_BENCH_GC_ROUNDS`, default 10, sets the
//! number of rounds).

use std::time::{Duration, Instant};

use meta::ops::gc::GcOptions;
use meta::{normalize, ArtifactRevisionId, ManifestRow, PathCondition, PublishRequest, RequestId};
use nokv::lifetime::{RemoveOptions, HISTORY_RETENTION_VERSIONS};
use nokv::{Client, PutOptions};

/// Single-path removals timed per store per round.
const REMOVES_PER_ROUND: usize = 8;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n: &usize| *n > 0)
        .unwrap_or(default)
}

/// One store with its live publications.
struct Store {
    label: &'static str,
    _dir: tempfile::TempDir,
    client: Client,
    live: usize,
    next: u64,
    gc_pass: Vec<Duration>,
    idle_pass: Vec<Duration>,
    remove: Vec<Duration>,
}

impl Store {
    fn new(label: &'static str, live: usize) -> Store {
        let dir = tempfile::tempdir().expect("tempdir");
        let client = Client::open(dir.path().join("store")).expect("open store");
        client.create_workbench("wb").expect("workbench");
        client
            .config_set(HISTORY_RETENTION_VERSIONS, "0")
            .expect("retention 0");
        let started = Instant::now();
        load_live(&client, live);
        eprintln!(
            "{label}: loaded {live} live publications in {:.1?}",
            started.elapsed()
        );
        let settle = client.gc(&GcOptions::default()).expect("settle pass");
        assert!(
            settle.collected.is_empty(),
            "nothing collectable after load"
        );
        Store {
            label,
            _dir: dir,
            client,
            live,
            next: 0,
            gc_pass: Vec::new(),
            idle_pass: Vec::new(),
            remove: Vec::new(),
        }
    }

    fn fresh(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// One round: churn, a collecting pass, an idle pass, single removals.
    fn round(&mut self, candidates: usize) {
        let body = vec![b'x'; 1024];
        let options = PutOptions::create("application/octet-stream", "bench");
        let dir = format!("churn/r{:05}", self.fresh());
        for j in 0..candidates {
            self.client
                .put("wb", &format!("{dir}/f{j:04}.bin"), &body, &options)
                .expect("churn put");
        }
        let removed = self.client.remove_prefix("wb", &dir).expect("remove churn");
        assert_eq!(removed.removed.len(), candidates);

        let t = Instant::now();
        let report = self.client.gc(&GcOptions::default()).expect("gc pass");
        self.gc_pass.push(t.elapsed());
        assert_eq!(report.collected.len(), candidates, "{report:?}");
        assert_eq!(report.objects_deleted(), candidates as u64);
        assert!(report.waiting.is_empty() && report.quarantined.is_empty());

        let t = Instant::now();
        let idle = self.client.gc(&GcOptions::default()).expect("idle pass");
        self.idle_pass.push(t.elapsed());
        assert!(idle.collected.is_empty());

        for _ in 0..REMOVES_PER_ROUND {
            let path = format!("single/f{:06}.bin", self.fresh());
            self.client
                .put("wb", &path, &body, &options)
                .expect("single put");
            let t = Instant::now();
            let r = self
                .client
                .remove("wb", &path, &RemoveOptions::default())
                .expect("remove");
            self.remove.push(t.elapsed());
            assert_eq!(r.size_bytes, 1024);
        }
        // Collect the single removals outside the measurements (keeps both stores alike).
        let r = self.client.gc(&GcOptions::default()).expect("cleanup pass");
        assert_eq!(r.collected.len(), REMOVES_PER_ROUND);
    }
}

/// Uploads one block object and publishes it for each of `live` paths.
fn load_live(client: &Client, live: usize) {
    let meta = client.meta();
    let objects = client.objects().clone();
    for i in 0..live {
        let body = format!("live publication {i}\n").into_bytes();
        let revision = ArtifactRevisionId::random().expect("revision id");
        let key = objstore::block_key(
            meta.logical_shard_id().as_bytes(),
            meta.root_id().as_bytes(),
            revision.as_bytes(),
            0,
        );
        objects.put_if_absent(&key, &body).expect("block");
        let digest = objstore::sha256_uri(&body);
        let request = PublishRequest {
            request_id: RequestId::random().expect("request id"),
            workbench_id: "wb".into(),
            path: normalize(&format!("live/d{:03}/f{i:06}.txt", i / 100)).expect("path"),
            condition: PathCondition::Create,
            revision_id: revision,
            logical_size: body.len() as u64,
            body_digest_uri: digest.clone(),
            content_type: "text/plain".into(),
            producer: "bench".into(),
            manifest_id: None,
            manifest: vec![ManifestRow {
                object_index: 0,
                physical_owner_revision: revision,
                physical_object_index: 0,
                object_key: key,
                logical_offset: 0,
                object_offset: 0,
                length: body.len() as u64,
                digest_uri: digest,
                append_segment: None,
            }],
            dependency_depth: 0,
            index_fields: Default::default(),
        };
        meta.publish(request).expect("publish");
    }
}

fn median(v: &[Duration]) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    s[s.len() / 2]
}

fn min(v: &[Duration]) -> Duration {
    v.iter().copied().min().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument selects nothing here.
    let live = env_usize("NOKV_BENCH_GC_LIVE", 1_000);
    let candidates = env_usize("NOKV_BENCH_GC_CANDIDATES", 64);
    let rounds = env_usize("NOKV_BENCH_GC_ROUNDS", 10);
    let mut stores = [Store::new("small", live), Store::new("large", live * 10)];
    // One warm-up round per store, not recorded.
    for s in stores.iter_mut() {
        s.round(candidates);
        s.gc_pass.clear();
        s.idle_pass.clear();
        s.remove.clear();
    }
    for _ in 0..rounds {
        for s in stores.iter_mut() {
            s.round(candidates);
        }
    }
    println!(
        "gc pass with {candidates} collectable revisions (1 object each); {rounds} rounds, {REMOVES_PER_ROUND} removes per round"
    );
    println!(
        "{:<6} {:>8} {:>15} {:>12} {:>15} {:>12} {:>14} {:>11}",
        "store",
        "live",
        "gc pass median",
        "gc pass min",
        "idle pass med.",
        "idle min",
        "remove median",
        "remove min"
    );
    for s in &stores {
        println!(
            "{:<6} {:>8} {:>12.2} ms {:>9.2} ms {:>12.2} ms {:>9.2} ms {:>11.2} ms {:>8.2} ms",
            s.label,
            s.live,
            ms(median(&s.gc_pass)),
            ms(min(&s.gc_pass)),
            ms(median(&s.idle_pass)),
            ms(min(&s.idle_pass)),
            ms(median(&s.remove)),
            ms(min(&s.remove)),
        );
    }
    let [small, large] = &stores;
    let ratio = |f: fn(&Store) -> &Vec<Duration>| {
        median(f(large)).as_secs_f64() / median(f(small)).as_secs_f64()
    };
    println!(
        "ratio large/small of medians ({}x live publications): gc pass {:.2}, idle pass {:.2}, remove {:.2}; per collected revision: small {:.3} ms, large {:.3} ms",
        large.live / small.live.max(1),
        ratio(|s| &s.gc_pass),
        ratio(|s| &s.idle_pass),
        ratio(|s| &s.remove),
        ms(median(&small.gc_pass)) / candidates as f64,
        ms(median(&large.gc_pass)) / candidates as f64,
    );
}
