//! Test-only child process for the multipart crash test (`tests/gc_s3.rs`): opens the store at
//! the first argument with an S3 provider on bucket `BUCKET` at `ENDPOINT` whose multipart
//! threshold (5 MiB) is below the store's 12 MiB block size, creates workbench `mp`, and
//! publishes a 12 MiB body streamed like `nokv collect` — one multipart upload. With
//! `NOKV_FAULT_POINT=multipart-after-first-part` (nokv's `fault-points` feature) it is killed
//! with SIGKILL after the first part was sent. The provider is wrapped in
//! [`nokv_tests::ShortKeys`] (s3s-fs's multipart file names cannot hold full block keys).

use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [store, bucket, endpoint] = args.as_slice() else {
        eprintln!("usage: multipart_collector STORE BUCKET ENDPOINT");
        std::process::exit(2);
    };
    let mut config = objstore::S3Config::new(bucket.clone(), "p");
    config.endpoint = Some(endpoint.clone());
    config.path_style = true;
    config.multipart_threshold = 5 * 1024 * 1024;
    config.part_size = 5 * 1024 * 1024;
    config.retry = objstore::RetryPolicy {
        max_attempts: 3,
        base_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(50),
    };
    let s3 = match objstore::S3::open(config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("s3: {e}");
            std::process::exit(1);
        }
    };
    let options = nokv::ClientOptions {
        block_size: 12 * 1024 * 1024,
        // s3s-fs cannot name multipart files after NoKV's full block keys (see ShortKeys).
        objects: Some(std::sync::Arc::new(nokv_tests::ShortKeys { inner: s3 })),
        ..Default::default()
    };
    let client = nokv_tests::open_or_exit(nokv::Client::open_with(store, options));
    if let Err(e) = client.create_workbench("mp") {
        eprintln!("create: {e}");
        std::process::exit(1);
    }
    let body: Vec<u8> = (0..12 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    let opts = nokv::PutOptions::create("application/octet-stream", "multipart_collector");
    match client.put_reader("mp", "outputs/big.bin", &body[..], &opts) {
        Ok(r) => println!("published generation {}", r.generation),
        Err(e) => {
            eprintln!("put: {e}");
            std::process::exit(1);
        }
    }
}
