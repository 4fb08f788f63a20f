//! Test-only child process for the move crash test (tests/tests/move_crash.rs): opens the store
//! given as the first argument and moves `src/file-<i>.bin` to `dst/file-<i>.bin` in workbench
//! `moves` for `i = START, START+1, …` while the source exists, printing `ACK <i> <generation>`
//! on stdout after each move returned. The parent SIGKILLs it at a moment of its choosing.

fn main() {
    nokv_tests::run_crash_child(
        "move_crasher",
        |_| Ok(()),
        |client, i| {
            let from = format!("src/file-{i}.bin");
            client.stat("moves", &from).ok()?;
            let to = format!("dst/file-{i}.bin");
            Some(
                client
                    .move_path("moves", &from, &to, &Default::default())
                    .map(|receipt| receipt.generation)
                    .map_err(|e| format!("move {i}: {e}")),
            )
        },
    );
}
