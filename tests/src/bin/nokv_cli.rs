//! The `nokv` command line, built inside nokv-tests so integration tests can spawn it through
//! `env!("CARGO_BIN_EXE_nokv_cli")` (Cargo only exposes a package's own binaries to its tests).
//! In test builds nokv's `fault-points` feature is on (this package's dev-dependency), so
//! `NOKV_FAULT_POINT=<point>` kills the process at that phase boundary (see `nokv::fault`).

fn main() -> std::process::ExitCode {
    nokv_cli::main_with_args(std::env::args_os())
}
