//! Test-only child process for the crash/reopen tests: opens the store given as the first
//! argument, creates workbench `crash`, then publishes `outputs/file-<i>.bin` (deterministic
//! content, see [`nokv_tests::crash_body`]) in a loop, printing `ACK <i> <generation>` on stdout
//! after each `put_file` returned. The parent SIGKILLs it at a moment of its choosing.

fn main() {
    nokv_tests::run_crash_child(
        "crash_writer",
        |client| {
            client
                .create_workbench("crash")
                .map(|_| ())
                .map_err(|e| format!("create: {e}"))
        },
        |client, i| {
            let body = nokv_tests::crash_body(i);
            let options = nokv::PutOptions::create("application/octet-stream", "crash_writer");
            Some(
                client
                    .put("crash", &format!("outputs/file-{i}.bin"), &body, &options)
                    .map(|receipt| receipt.generation)
                    .map_err(|e| format!("put {i}: {e}")),
            )
        },
    );
}
