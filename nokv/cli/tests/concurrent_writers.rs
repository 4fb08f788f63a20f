//! Issue 14 acceptance, embedded half: 64 threads share one `Client` and each publishes its own
//! distinct paths. With the command sequencer no put fails or gives up for another writer's sake
//! (no `Busy`, no read-version conflict), and every acknowledged put is readable with the exact
//! bytes afterwards — also after reopening the store.

use std::sync::Mutex;

use nokv::{Client, PutOptions};

#[test]
fn sixty_four_threads_on_one_client_lose_no_write_and_never_see_busy() {
    const THREADS: usize = 64;
    const EACH: usize = 4;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let client = Client::open(&store).unwrap();
    client.create_workbench("wb").unwrap();
    let failures = Mutex::new(Vec::new());
    let acked = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (client, failures, acked) = (client.clone(), &failures, &acked);
            s.spawn(move || {
                let opts = PutOptions::create("application/octet-stream", "test");
                for i in 0..EACH {
                    let path = format!("outputs/t{t:02}/f{i}");
                    let body = vec![(t * 31 + i) as u8; 4096];
                    match client.put("wb", &path, &body, &opts) {
                        Ok(r) => acked.lock().unwrap().push((path, body, r.generation)),
                        Err(e) => failures.lock().unwrap().push(format!("{path}: {e:?}")),
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "failed puts: {failures:?}");
    let acked = acked.into_inner().unwrap();
    assert_eq!(acked.len(), THREADS * EACH);
    for (path, body, generation) in &acked {
        assert_eq!(&client.read_all("wb", path).unwrap(), body);
        assert_eq!(client.stat("wb", path).unwrap().generation, *generation);
    }
    drop(client);
    let client = Client::open(&store).unwrap();
    for (path, body, _) in &acked {
        assert_eq!(
            &client.read_all("wb", path).unwrap(),
            body,
            "{path} after reopen"
        );
    }
}
