//! Test and benchmark child process for a store shared by several writer processes (docs/
//! design.md, "Many processes on one store"): opens the store given as the first argument with
//! the default options (the writer lock shared, taken per write), creates workbench `shared`
//! unless another writer did, then publishes `outputs/<name>-<i>.bin` (deterministic content,
//! see [`nokv_tests::shared_body`]) for the given number of milliseconds, printing
//! `ACK <i> <generation> <microseconds the put took>` after each put returned. At the end it
//! prints `WAITS <n>` and then one line per wait for the writer lock (microseconds) its holt
//! engine recorded, then `DONE`. A put that fails prints the error on stderr and exits 1.
//!
//! With `hold` as the third argument instead of a duration, it publishes one file, then takes
//! the writer lock (`holt::Db::hold_writer`), prints `HOLDING` and sleeps until killed.

use std::io::Write;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [store, name, what] = args.as_slice() else {
        eprintln!("usage: shared_writer STORE NAME (MILLIS | hold)");
        std::process::exit(2);
    };
    let client = nokv_tests::open_or_exit(nokv::Client::open(store));
    match client.create_workbench("shared") {
        Ok(_) | Err(nokv::Error::AlreadyExists { .. }) => {}
        Err(e) => {
            eprintln!("create: {e}");
            std::process::exit(1);
        }
    }
    let stdout = std::io::stdout();
    let put = |i: u64| {
        let body = nokv_tests::shared_body(name, i);
        let options = nokv::PutOptions::create("application/octet-stream", "shared_writer");
        let started = Instant::now();
        match client.put(
            "shared",
            &format!("outputs/{name}-{i}.bin"),
            &body,
            &options,
        ) {
            Ok(receipt) => {
                let mut out = stdout.lock();
                let _ = writeln!(
                    out,
                    "ACK {i} {} {}",
                    receipt.generation,
                    started.elapsed().as_micros()
                );
                let _ = out.flush();
            }
            Err(e) => {
                eprintln!("put {i}: {e}");
                std::process::exit(1);
            }
        }
    };
    if what == "hold" {
        put(0);
        let Some(db) = client.meta().holt_db() else {
            eprintln!("not a holt store");
            std::process::exit(1);
        };
        let hold = match db.hold_writer() {
            Ok(h) => h,
            Err(e) => {
                eprintln!("hold: {e}");
                std::process::exit(1);
            }
        };
        {
            let mut out = stdout.lock();
            let _ = writeln!(out, "HOLDING");
            let _ = out.flush();
        }
        loop {
            std::thread::sleep(Duration::from_secs(1));
            let _ = &hold;
        }
    }
    let Ok(millis) = what.parse::<u64>() else {
        eprintln!("not a duration in milliseconds: {what}");
        std::process::exit(2);
    };
    let deadline = Instant::now() + Duration::from_millis(millis);
    let mut i = 0;
    while Instant::now() < deadline {
        put(i);
        i += 1;
    }
    let waits = client
        .meta()
        .holt_db()
        .map(holt::Db::writer_lock_waits)
        .unwrap_or_default();
    let mut out = stdout.lock();
    let _ = writeln!(out, "WAITS {}", waits.len());
    for w in waits {
        let _ = writeln!(out, "{w}");
    }
    let _ = writeln!(out, "DONE");
    let _ = out.flush();
}
