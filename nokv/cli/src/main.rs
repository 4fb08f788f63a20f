//! The `nokv` command line. See `nokv --help` and [`nokv_cli`].

use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

fn main() -> std::process::ExitCode {
    // Warnings of nokv itself (e.g. failed background checkpoints) go to stderr, one line each;
    // stdout stays the command's answer (and the MCP stdio channel).
    let _ = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .without_time()
                .with_target(false)
                .with_ansi(false),
        )
        .with(
            Targets::new()
                .with_target("nokv", tracing::Level::WARN)
                .with_target("nokv_server", tracing::Level::WARN),
        )
        .try_init();
    nokv_cli::main_with_args(std::env::args_os())
}
