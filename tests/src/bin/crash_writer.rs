//! Test-only child process for the crash/reopen tests: opens the store given as the first
//! argument, creates workbench `crash`, then publishes `outputs/file-<i>.bin` (deterministic
//! content, see [`nokv_tests::crash_body`]) in a loop, printing `ACK <i> <generation>` on stdout
//! after each `put_file` returned. The parent SIGKILLs it at a moment of its choosing.

use std::io::Write;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(store) = args.next() else {
        eprintln!("usage: crash_writer STORE [START]");
        std::process::exit(2);
    };
    let start: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let client = match nokv::Client::open(&store) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("open: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = client.create_workbench("crash") {
        eprintln!("create: {e}");
        std::process::exit(1);
    }
    let stdout = std::io::stdout();
    for i in start.. {
        let body = nokv_tests::crash_body(i);
        let options = nokv::PutOptions::create("application/octet-stream", "crash_writer");
        match client.put("crash", &format!("outputs/file-{i}.bin"), &body, &options) {
            Ok(receipt) => {
                let mut out = stdout.lock();
                let _ = writeln!(out, "ACK {i} {}", receipt.generation);
                let _ = out.flush();
            }
            Err(e) => {
                eprintln!("put {i}: {e}");
                std::process::exit(1);
            }
        }
    }
}
