//! Per-call cost of the Rust SDK for the two calls the Python SDK's overhead is measured on:
//! `Client::stat` of a 4 KiB file and a create-only `Client::put` of 4 KiB.
//!
//! `cargo bench -p nokv-python --bench sdk_call -- STORE_DIR [STATS] [PUTS]` opens (creating)
//! the store, creates workbench `bench` and file `input/stat.bin` when missing, times `STATS`
//! stats (default 20000) and `PUTS` puts of fresh paths `outputs/rust/<run>/<i>.bin` (default
//! 1000), and prints one JSON line `{"stat_ns": …, "put_ns": …}` (mean wall time per call).
//! `python/bench/overhead.py` runs it and the same loop from Python on the same store.

use std::time::Instant;

use nokv::{Client, PutOptions};

fn arg(args: &[String], i: usize, default: usize) -> usize {
    args.get(i).and_then(|s| s.parse().ok()).unwrap_or(default)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `cargo bench` passes `--bench`; keep only positional arguments.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let Some(dir) = args.first() else {
        eprintln!("usage: sdk_call STORE_DIR [STATS] [PUTS]");
        std::process::exit(2);
    };
    let stats = arg(&args, 1, 20_000);
    let puts = arg(&args, 2, 1_000);
    let client = Client::open(dir)?;
    client.create_workbench("bench")?;
    let body = vec![7u8; 4096];
    let create = PutOptions::create("application/octet-stream", "bench");
    if client.stat("bench", "input/stat.bin").is_err() {
        client.put("bench", "input/stat.bin", &body, &create)?;
    }
    let start = Instant::now();
    for _ in 0..stats {
        std::hint::black_box(client.stat("bench", "input/stat.bin")?);
    }
    let stat_ns = start.elapsed().as_nanos() as f64 / stats.max(1) as f64;
    let run = client.now_unix_ms();
    let start = Instant::now();
    for i in 0..puts {
        client.put(
            "bench",
            &format!("outputs/rust/{run}/{i}.bin"),
            &body,
            &create,
        )?;
    }
    let put_ns = start.elapsed().as_nanos() as f64 / puts.max(1) as f64;
    println!("{{\"stat_ns\": {stat_ns:.0}, \"put_ns\": {put_ns:.0}, \"stats\": {stats}, \"puts\": {puts}}}");
    Ok(())
}
