//! Build script of `meta`: with the `etcd` feature it makes sure a protoc binary exists before
//! `etcd-client`'s build script compiles etcd's API definitions. Cargo fetches every package of
//! the build (this build dependency, `protoc-bin-vendored`, included) before any build script
//! runs, so `.cargo/protoc` — the `PROTOC` that `.cargo/config.toml` sets — finds the vendored
//! binary on a machine without a system protoc. Nothing is generated here.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "etcd")]
    if let Err(e) = protoc_bin_vendored::protoc_bin_path() {
        println!(
            "cargo:warning=no vendored protoc for this platform ({e}); building the etcd engine \
             needs protoc on PATH (e.g. Debian's protobuf-compiler)"
        );
    }
}
