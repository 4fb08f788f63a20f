//! `nokv shard list`: every logical shard with its engine, current owner (address, epoch, lease)
//! and roots. Prints one JSON envelope.

use std::io::Write;

use clap::Subcommand;
use serde_json::{json, Value};

use crate::root_cmd::{envelope, shard_json, ControlArgs};
use nokv::error::Result;

/// `nokv shard` actions.
#[derive(Debug, Subcommand)]
pub enum ShardCommand {
    /// List every logical shard: engine, owner (if one holds its lease now), last owner epoch and
    /// the roots placed on it.
    List {
        /// The control plane.
        #[command(flatten)]
        control: ControlArgs,
    },
}

fn run(cmd: ShardCommand) -> Result<Value> {
    match cmd {
        ShardCommand::List { control } => {
            let cp = control.connect()?;
            let shards: Vec<Value> = cp.list_shards()?.iter().map(shard_json).collect();
            Ok(json!({ "shards": shards }))
        }
    }
}

/// Runs one `nokv shard` action and prints its envelope; returns the exit code.
pub fn run_shard(cmd: ShardCommand, out: &mut dyn Write) -> u8 {
    envelope(run(cmd), out)
}
