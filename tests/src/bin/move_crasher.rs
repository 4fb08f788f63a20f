//! Test-only child process for the move crash test (tests/tests/move_crash.rs): opens the store
//! given as the first argument and moves `src/file-<i>.bin` to `dst/file-<i>.bin` in workbench
//! `moves` for `i = START, START+1, …` while the source exists, printing `ACK <i> <generation>`
//! on stdout after each move returned. The parent SIGKILLs it at a moment of its choosing.

use std::io::Write;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(store) = args.next() else {
        eprintln!("usage: move_crasher STORE [START]");
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
    let stdout = std::io::stdout();
    for i in start.. {
        let from = format!("src/file-{i}.bin");
        if client.stat("moves", &from).is_err() {
            break;
        }
        let to = format!("dst/file-{i}.bin");
        match client.move_path("moves", &from, &to, &Default::default()) {
            Ok(receipt) => {
                let mut out = stdout.lock();
                let _ = writeln!(out, "ACK {i} {}", receipt.generation);
                let _ = out.flush();
            }
            Err(e) => {
                eprintln!("move {i}: {e}");
                std::process::exit(1);
            }
        }
    }
}
