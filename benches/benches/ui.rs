//! Page render time of `nokv serve`'s web view (`/ui/`, docs/ui.md), a bench binary.
//!
//! A store gets one workbench `big` with 10,000 files in one directory (`outputs/`, small JSON
//! documents published with `index_json`, so the typed index holds 10,000 rows of each field),
//! a CSV input, a commit, a snapshot and a run workbench committed on it. A server runs in this
//! process on a loopback port without a token; each page is fetched `NOKV_BENCH_PAGES` times
//! (default 200) over one keep-alive connection after 5 warm-up fetches, and p50/p90/p99 of the
//! whole request (the server's rendering plus a loopback round trip) are printed in
//! milliseconds. Run: `cargo bench -p nokv-benches --bench ui` (`NOKV_BENCH_FILES` changes the
//! file count).

use std::time::Instant;

use nokv::{Client, PutOptions};
use nokv_benches::{env_u64, percentiles, time_n};
use nokv_server as server;
use nokv_server::ServerOptions;
use serde_json::json;

fn main() {
    let files = env_u64("NOKV_BENCH_FILES").unwrap_or(10_000);
    let samples = env_u64("NOKV_BENCH_PAGES").unwrap_or(200);
    let tmp = tempfile::tempdir_in(nokv_benches::bench_dir()).expect("tempdir");
    let store = tmp.path().join("store");
    let started = Instant::now();
    let head = {
        let client = Client::open(&store).expect("open");
        client.create_workbench("big").expect("create");
        let threads = 8u64;
        std::thread::scope(|s| {
            for t in 0..threads {
                let client = client.clone();
                s.spawn(move || {
                    let mut opts = PutOptions::create("application/json", "bench");
                    opts.index_json = true;
                    for i in (t..files).step_by(threads as usize) {
                        let body = json!({"n": i, "kind": if i % 2 == 0 { "even" } else { "odd" }, "score": i as f64 / 7.0});
                        client
                            .put("big", &format!("outputs/f{i:05}.json"), body.to_string().as_bytes(), &opts)
                            .expect("put");
                    }
                });
            }
        });
        let mut csv = String::from("a,b,c\n");
        for i in 0..5000 {
            csv.push_str(&format!("{i},{},{}\n", i * 2, i % 7));
        }
        client
            .put(
                "big",
                "input/table.csv",
                csv.as_bytes(),
                &PutOptions::create("text/csv", "bench"),
            )
            .expect("put csv");
        let wb = nokv::workbench::Workbench::new(client.clone());
        let digest = client.tree_content_digest("big").expect("digest");
        let c = wb.call(
            "workbench_commit",
            &json!({"id": "big", "manifest": {"kind": "input"}, "content_digest_uri": digest}),
        );
        assert_eq!(c["status"], "success", "{c}");
        let s = wb.call("workbench_snapshot", &json!({"id": "big", "name": "base"}));
        assert_eq!(s["status"], "success", "{s}");
        client.create_workbench("run").expect("create run");
        client
            .put(
                "run",
                "outputs/r.txt",
                b"result\n",
                &PutOptions::create("text/plain", "bench"),
            )
            .expect("put run");
        let digest = client.tree_content_digest("run").expect("digest");
        client
            .commit(&nokv::commit::CommitRequest {
                workbench_id: "run".into(),
                manifest: json!({"kind": "run"}),
                content_digest_uri: digest,
                replace: false,
                parents: vec![c["commit_identity"].as_str().expect("id").to_owned()],
            })
            .expect("commit run");
        c["commit_identity"].as_str().expect("id").to_owned()
    };
    eprintln!(
        "store with {files} files ready in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let srv = server::start(ServerOptions {
        store: store.clone(),
        listen: "127.0.0.1:0".into(),
        ..ServerOptions::default()
    })
    .expect("start");
    let agent = ureq::Agent::new_with_defaults();
    let url = srv.url();
    let pages = [
        ("workbench list", "/ui/".to_string()),
        (
            "tree: 10,000-file directory, first page",
            "/ui/wb/big?path=outputs".into(),
        ),
        ("tree: sections", "/ui/wb/big".into()),
        (
            "file: JSON tree",
            "/ui/file/big?path=outputs/f05000.json".into(),
        ),
        (
            "file: CSV table",
            "/ui/file/big?path=input/table.csv".into(),
        ),
        (
            "file: at a snapshot",
            "/ui/file/big?path=outputs/f09999.json&at=base".into(),
        ),
        ("lineage", "/ui/lineage".into()),
        ("commit", "/ui/commit/".into()),
        ("snapshots", "/ui/snapshots/big".into()),
        ("live feed", "/ui/feed".into()),
        (
            "GC explain",
            "/ui/gc?wb=big&path=outputs/f00001.json".into(),
        ),
        (
            "search: kind = even, sorted",
            "/ui/search?run=1&wb=big&fields=n,kind&f=kind&op=eq&v=%22even%22&sort=n&dir=desc"
                .into(),
        ),
        (
            "aggregate: count by kind",
            "/ui/aggregate?run=1&wb=big&group=kind&mn=files&mo=count&mf=".into(),
        ),
    ];
    println!("| page ({files} files) | requests | p50 ms | p90 ms | p99 ms |");
    println!("|---|---|---|---|---|");
    for (name, path) in pages {
        let path = if path == "/ui/commit/" {
            format!("{path}{head}")
        } else {
            path
        };
        let get = || {
            let mut r = agent.get(&format!("{url}{path}")).call().expect("get");
            assert_eq!(r.status(), 200, "{path}");
            let body = r.body_mut().read_to_string().expect("body");
            assert!(body.contains("</html>"), "{path}");
        };
        for _ in 0..5 {
            get();
        }
        let (p50, p90, p99) = percentiles(time_n(samples, get));
        println!("| {name} | {samples} | {p50:.2} | {p90:.2} | {p99:.2} |");
    }
    srv.shutdown().expect("shutdown");
}
