//! `nokv config get NAME`, `nokv config set NAME VALUE`, `nokv config list` — durable store
//! settings (today `history_retention_versions`; see [`meta::ops::settings`]).
//!
//! Prints `NAME = VALUE (stored | default)`; `set` also prints the previous value. Exit 0 on
//! success, 1 on an error (unknown name, invalid value, missing store).

use std::io::Write;
use std::path::Path;

use clap::Subcommand;

use crate::{EXIT_OK, EXIT_TOOL_ERROR};
use nokv::client::Client;
use nokv::lifetime::SettingValue;

/// `nokv config` actions.
#[derive(Debug, Clone, Subcommand, serde::Serialize, serde::Deserialize)]
pub enum ConfigCommand {
    /// Print a setting's value in effect and whether it is stored or the default.
    Get {
        /// Setting name, e.g. `history_retention_versions`.
        name: String,
    },
    /// Store a setting (one metadata command; every later open uses it).
    Set {
        /// Setting name.
        name: String,
        /// New value (a decimal integer).
        value: String,
    },
    /// Print every setting.
    List,
}

fn line(v: &SettingValue) -> String {
    format!(
        "{} = {} ({})",
        v.name,
        v.effective,
        if v.stored.is_some() {
            "stored"
        } else {
            "default"
        }
    )
}

/// Runs one `nokv config` action; returns the exit code. `get` and `list` only read, so they
/// open the store read-only (no lock: they answer next to a running writer).
pub fn run_config(dir: &Path, cmd: ConfigCommand, out: &mut dyn Write) -> u8 {
    let reads_only = !matches!(cmd, ConfigCommand::Set { .. });
    match crate::read_only::open_existing(dir, reads_only) {
        Ok(client) => run_config_with(&client, cmd, out, &mut std::io::stderr()),
        Err(e) => {
            crate::eprint_error(&e);
            EXIT_TOOL_ERROR
        }
    }
}

/// One `nokv config` action on an open client (the CLI and the server share it): the lines on
/// `out`, failures as `nokv: …` on `err`; returns the exit code.
pub(crate) fn run_config_with(
    client: &Client,
    cmd: ConfigCommand,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
    let result = match cmd {
        ConfigCommand::Get { name } => client.config_get(&name).map(|v| {
            let _ = writeln!(out, "{}", line(&v));
        }),
        ConfigCommand::List => client.config_list().map(|all| {
            for v in all {
                let _ = writeln!(out, "{}", line(&v));
            }
        }),
        ConfigCommand::Set { name, value } => client.config_set(&name, &value).map(|r| {
            let previous = r
                .previous
                .map_or_else(|| "default".to_owned(), |p| p.to_string());
            let _ = writeln!(
                out,
                "{name} = {} (stored; was {previous}{})",
                r.value,
                if r.unchanged { ", unchanged" } else { "" }
            );
        }),
    };
    match result {
        Ok(()) => EXIT_OK,
        Err(e) => {
            let _ = writeln!(err, "nokv: {e}");
            EXIT_TOOL_ERROR
        }
    }
}
