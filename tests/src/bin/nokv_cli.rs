//! The `nokv` command line built inside the test package, so integration tests get its path
//! (`CARGO_BIN_EXE_nokv_cli`); with the package feature `fault-points` it aborts at the
//! `NOKV_FAULT_POINT` boundary (see `nokv::commit`).

fn main() -> std::process::ExitCode {
    nokv::cli::main_with_args(std::env::args_os())
}
