//! The `nokv` command line. See `nokv --help` and [`nokv::cli`].

fn main() -> std::process::ExitCode {
    nokv::cli::main_with_args(std::env::args_os())
}
