//! `nokv root create|list|show`: RootPlacement records in the control plane (docs/metadata-format.md,
//! "Placement Authority"). Each prints one JSON envelope (exit 0 success, 1 refused or failed).

use std::io::Write;

use clap::{Args, Subcommand};
use serde_json::{json, Value};

use nokv::control::shard::ShardStatus;
use nokv::control::{ControlPlane, RootRecord};
use nokv::error::{Error, Result};
use nokv::workbench::store_error;
use nokv_commands::{print_json, EXIT_OK, EXIT_TOOL_ERROR};

/// Where the control plane is.
#[derive(Debug, Clone, Args)]
pub struct ControlArgs {
    /// etcd client URLs of the control plane, comma-separated (default: `$NOKV_CONTROL`).
    #[arg(long, value_name = "URLS")]
    pub control: Option<String>,
    /// Deployment namespace in etcd (default `/nokv/`).
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,
}

impl ControlArgs {
    /// Connects to the named control plane.
    ///
    /// Errors: [`Error::InvalidArgument`] without `--control` and `$NOKV_CONTROL`, or for a bad
    /// URL or namespace; etcd unavailable.
    pub fn connect(&self) -> Result<ControlPlane> {
        let url = match &self.control {
            Some(u) => u.clone(),
            None => std::env::var("NOKV_CONTROL").map_err(|_| {
                Error::InvalidArgument(
                    "no control plane: pass --control URLS or set NOKV_CONTROL".into(),
                )
            })?,
        };
        let endpoints = nokv::control::parse_control_url(&url)?;
        let ns = self
            .namespace
            .clone()
            .unwrap_or_else(|| meta::store::etcd::DEFAULT_NAMESPACE.to_owned());
        ControlPlane::connect(endpoints, &ns)
    }
}

/// `nokv root` actions.
#[derive(Debug, Subcommand)]
pub enum RootCommand {
    /// Create a root: its RootPlacement (Provisioning, placement generation 1) on a new
    /// etcd-backed logical shard, or on `--shard` (which must not serve a root yet).
    Create {
        /// Root name (ASCII letters, digits, `_`, `-`; at most 128 bytes).
        name: String,
        /// Existing logical shard id (32 hex) to place the root on.
        #[arg(long, value_name = "ID")]
        shard: Option<String>,
        /// The control plane.
        #[command(flatten)]
        control: ControlArgs,
    },
    /// List every root with its placement.
    List {
        /// The control plane.
        #[command(flatten)]
        control: ControlArgs,
    },
    /// Show one root's placement and its shard's owner.
    Show {
        /// Root name.
        name: String,
        /// The control plane.
        #[command(flatten)]
        control: ControlArgs,
    },
}

/// The JSON shape of a root record.
pub fn root_json(r: &RootRecord) -> Value {
    json!({
        "name": r.name,
        "root_id": r.placement.root_id.to_string(),
        "logical_shard_id": r.placement.logical_shard_id.to_string(),
        "placement_generation": r.placement.placement_generation,
        "lifecycle": format!("{:?}", r.placement.lifecycle),
    })
}

fn run(cmd: RootCommand) -> Result<Value> {
    match cmd {
        RootCommand::Create {
            name,
            shard,
            control,
        } => {
            let cp = control.connect()?;
            let shard = shard
                .map(|s| {
                    meta::LogicalShardId::from_hex(&s)
                        .map_err(|_| Error::InvalidArgument(format!("invalid shard id {s:?}")))
                })
                .transpose()?;
            let r = cp.create_root(&name, shard)?;
            Ok(json!({ "root": root_json(&r) }))
        }
        RootCommand::List { control } => {
            let cp = control.connect()?;
            let roots: Vec<Value> = cp.list_roots()?.iter().map(root_json).collect();
            Ok(json!({ "roots": roots }))
        }
        RootCommand::Show { name, control } => {
            let cp = control.connect()?;
            let r = cp.root_by_name(&name)?.ok_or_else(|| Error::Placement {
                kind: nokv::control::PlacementErrorKind::UnknownRoot,
                reason: format!("no root named {name:?}"),
            })?;
            let shard = cp
                .list_shards()?
                .into_iter()
                .find(|s| s.record.logical_shard_id == r.placement.logical_shard_id.to_string());
            let mut v = root_json(&r);
            if let (Some(s), Value::Object(m)) = (shard, &mut v) {
                m.insert("shard".into(), shard_json(&s));
            }
            Ok(json!({ "root": v }))
        }
    }
}

/// Runs one `nokv root` action and prints its envelope; returns the exit code.
pub fn run_root(cmd: RootCommand, out: &mut dyn Write) -> u8 {
    envelope(run(cmd), out)
}

/// Prints `{"status": "success", …fields}` or the error envelope.
pub(super) fn envelope(result: Result<Value>, out: &mut dyn Write) -> u8 {
    match result {
        Ok(Value::Object(fields)) => {
            let mut v = serde_json::Map::new();
            v.insert("status".into(), Value::from("success"));
            v.extend(fields);
            print_json(out, &Value::Object(v));
            EXIT_OK
        }
        Ok(other) => {
            print_json(out, &json!({"status": "success", "result": other}));
            EXIT_OK
        }
        Err(e) => {
            print_json(out, &store_error(e).envelope());
            EXIT_TOOL_ERROR
        }
    }
}

/// The JSON shape of a shard with its owner and roots.
pub fn shard_json(s: &ShardStatus) -> Value {
    json!({
        "logical_shard_id": s.record.logical_shard_id,
        "engine": s.record.engine,
        "owner": s.owner.as_ref().map(|o| json!({
            "owner_id": o.owner_id,
            "address": o.address,
            "epoch": o.epoch,
            "lease_id": o.lease_id,
            "ttl_seconds": o.ttl_seconds,
        })),
        "last_owner_epoch": s.last_epoch,
        "roots": s.roots.iter().map(|r| Value::from(r.name.clone())).collect::<Vec<_>>(),
    })
}
