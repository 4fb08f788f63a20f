//! Durability proven by killing a real writer process: every `put_file` that returned before the
//! SIGKILL is present after reopen with identical bytes, and the put in flight is either absent
//! or complete — never partial.

#[test]
fn acknowledged_puts_survive_sigkill_and_inflight_puts_are_all_or_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let mut all_acked = Vec::new();
    let mut next = 0u64;
    for cycle in 0..12u64 {
        let acked = nokv_tests::crash_writer_killed_after(
            env!("CARGO_BIN_EXE_crash_writer"),
            &store,
            next,
            1 + (cycle * 7) % 5,
        );
        assert!(!acked.is_empty());
        next = acked.last().unwrap().0 + 2; // skip the in-flight index; checked below
        all_acked.extend(acked);
        // Reopen in this process and check everything acknowledged so far.
        let client = nokv::Client::open(&store).expect("reopen after SIGKILL");
        for (i, g) in &all_acked {
            let path = format!("outputs/file-{i}.bin");
            let entry = client
                .stat("crash", &path)
                .unwrap_or_else(|e| panic!("{path} lost: {e}"));
            assert_eq!(entry.generation, *g);
            let body = client.read_all("crash", &path).expect("read acked body");
            assert_eq!(
                body,
                nokv_tests::crash_body(*i),
                "{path} differs after reopen"
            );
        }
        // The put in flight at the kill: absent or complete.
        let inflight = next - 1;
        let path = format!("outputs/file-{inflight}.bin");
        if client.stat("crash", &path).is_ok() {
            let body = client
                .read_all("crash", &path)
                .expect("in-flight body readable");
            assert_eq!(body, nokv_tests::crash_body(inflight));
        }
    }
}
