//! Test-only child process for the restore crash tests: `restore_crasher STORE SOURCE DEST
//! snapshot|commit ID` opens the store and runs one restore. Built with the `fault-points`
//! feature and run with `NOKV_FAULT_POINT=restore-after-…`, it aborts at that phase boundary
//! (process loss); otherwise it prints `OK <operation_id> <idempotent_replay>` and exits 0.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [store, source, dest, kind, id] = args.as_slice() else {
        eprintln!("usage: restore_crasher STORE SOURCE DEST snapshot|commit ID");
        std::process::exit(2);
    };
    let from = match kind.as_str() {
        "snapshot" => match id.parse::<u64>() {
            Ok(n) => nokv::restore::RestoreFrom::Snapshot(
                meta::ops::snapshot::SnapshotSelector::Id(meta::ids::SnapshotId(n)),
            ),
            Err(_) => {
                eprintln!("snapshot id must be an integer");
                std::process::exit(2);
            }
        },
        "commit" => match meta::ids::CommitId::from_hex(id) {
            Ok(c) => nokv::restore::RestoreFrom::Commit(c),
            Err(e) => {
                eprintln!("commit id: {e}");
                std::process::exit(2);
            }
        },
        _ => {
            eprintln!("source kind must be snapshot or commit");
            std::process::exit(2);
        }
    };
    let client = nokv_tests::open_or_exit(nokv::Client::open(store));
    let req = nokv::restore::RestoreRequest {
        source_workbench_id: source.clone(),
        destination_workbench_id: dest.clone(),
        from,
    };
    match client.restore(&req) {
        Ok(r) => println!("OK {} {}", r.operation_id, r.idempotent_replay),
        Err(e) => {
            eprintln!("restore: {e}");
            std::process::exit(1);
        }
    }
}
