//! What each store command needs (docs/server.md, "Scopes"): the action class and the
//! workbenches a [`CommandRequest`] touches, so `nokv serve` checks `POST /v1/commands/…` with
//! the same scope model as its routes and tools.

use nokv::access::Action;

use crate::commit_cmd::{CommitAction, TagCommand};
use crate::request::CommandRequest;
use crate::restore_cmd::RestoreCommand;
use crate::snapshot_cmd::SnapshotCommand;

/// One requirement: `action` on a workbench, or on everything (`None`: a store-wide command or
/// one whose target is not a workbench, such as a commit id).
pub type Need = (Action, Option<String>);

impl CommandRequest {
    /// Every scope this command needs; all of them must be granted.
    ///
    /// `gc`, `fsck`, `config`, `operation`, `snapshot reap` and `demo` are `admin` on
    /// everything; `find`, `commit show|retire` by commit id and a diff side given as a commit
    /// id need their action on everything (a commit id names no workbench the check could use).
    pub fn needs(&self) -> Vec<Need> {
        let wb = |a: Action, w: &str| vec![(a, Some(w.to_string()))];
        let all = |a: Action| vec![(a, None)];
        match self {
            CommandRequest::Commit(c) => match (&c.action, &c.workbench) {
                (None, Some(w)) => wb(Action::Lifecycle, w),
                (None, None) | (Some(CommitAction::Retire { .. }), _) => all(Action::Lifecycle),
                (
                    Some(CommitAction::Show {
                        workbench: Some(w),
                        commit: None,
                    }),
                    _,
                ) => wb(Action::Read, w),
                (Some(CommitAction::Show { .. }), _) => all(Action::Read),
            },
            CommandRequest::Tag(t) => match t {
                TagCommand::Set { workbench, .. } | TagCommand::Delete { workbench, .. } => {
                    wb(Action::Lifecycle, workbench)
                }
                TagCommand::Get { workbench, .. } | TagCommand::List { workbench } => {
                    wb(Action::Read, workbench)
                }
            },
            CommandRequest::Find(_) => all(Action::Read),
            CommandRequest::Snapshot(s) => match s {
                SnapshotCommand::Create { workbench, .. }
                | SnapshotCommand::Renew { workbench, .. }
                | SnapshotCommand::Retire { workbench, .. } => wb(Action::Lifecycle, workbench),
                SnapshotCommand::List { workbench } => wb(Action::Read, workbench),
                SnapshotCommand::Reap => all(Action::Admin),
            },
            CommandRequest::Restore(r) => match r {
                RestoreCommand::Run {
                    source,
                    destination,
                    ..
                } => vec![
                    (Action::Read, Some(source.clone())),
                    (Action::Lifecycle, Some(destination.clone())),
                ],
                RestoreCommand::Abort { destination } => wb(Action::Lifecycle, destination),
                RestoreCommand::Status { destination } => wb(Action::Read, destination),
            },
            CommandRequest::Operation(_)
            | CommandRequest::Demo
            | CommandRequest::Gc(_)
            | CommandRequest::Fsck(_)
            | CommandRequest::Config(_)
            | CommandRequest::Token(_)
            | CommandRequest::Audit(_) => all(Action::Admin),
            CommandRequest::Rm(a) => wb(Action::Write, &a.workbench),
            CommandRequest::Mv(a) => wb(Action::Write, &a.workbench),
            CommandRequest::Diff(d) => [&d.a, &d.b]
                .into_iter()
                .map(|side| (Action::Read, diff_side_workbench(side)))
                .collect(),
            CommandRequest::Expire(a) => wb(Action::Lifecycle, &a.workbench),
            CommandRequest::Ls(a) => wb(Action::Read, &a.workbench),
            CommandRequest::Tree(a) => wb(Action::Read, &a.workbench),
            CommandRequest::Log(a) => wb(Action::Read, &a.workbench),
        }
    }

    /// Whether the command changes the store or its token registry (the audit trail records
    /// these): not `gc --dry-run|--explain`, `fsck` without `--repair-index`, `config get|list`,
    /// `operation list` or any listing.
    pub fn mutates(&self) -> bool {
        match self {
            CommandRequest::Commit(c) => !matches!(c.action, Some(CommitAction::Show { .. })),
            CommandRequest::Tag(t) => {
                matches!(t, TagCommand::Set { .. } | TagCommand::Delete { .. })
            }
            CommandRequest::Snapshot(s) => !matches!(s, SnapshotCommand::List { .. }),
            CommandRequest::Restore(r) => !matches!(r, RestoreCommand::Status { .. }),
            CommandRequest::Operation(o) => matches!(o, crate::OperationAction::Recover),
            CommandRequest::Gc(g) => !g.dry_run && g.explain.is_none(),
            CommandRequest::Fsck(f) => f.repair_index,
            CommandRequest::Config(c) => {
                matches!(c, crate::config_cmd::ConfigCommand::Set { .. })
            }
            CommandRequest::Demo
            | CommandRequest::Rm(_)
            | CommandRequest::Mv(_)
            | CommandRequest::Expire(_) => true,
            CommandRequest::Token(t) => t.mutates(),
            CommandRequest::Find(_)
            | CommandRequest::Audit(_)
            | CommandRequest::Diff(_)
            | CommandRequest::Ls(_)
            | CommandRequest::Tree(_)
            | CommandRequest::Log(_) => false,
        }
    }

    /// The workbench the command is about, for the audit trail (the first one it names).
    pub fn workbench(&self) -> Option<String> {
        self.needs().into_iter().find_map(|(_, w)| w)
    }

    /// The workbench-relative path the command is about (`rm`, `mv` source), for the audit
    /// trail.
    pub fn path(&self) -> Option<String> {
        match self {
            CommandRequest::Rm(a) => Some(a.path.clone()),
            CommandRequest::Mv(a) => Some(a.from.clone()),
            _ => None,
        }
    }

    /// The audit trail's name of the command: `rm`, `snapshot create`, `token revoke`, …
    pub fn audit_name(&self) -> String {
        let (name, args) = self.to_wire();
        let sub = match &args {
            serde_json::Value::String(s) => Some(s.to_lowercase()),
            serde_json::Value::Object(o) if o.len() == 1 => {
                o.keys().next().map(|k| k.to_lowercase())
            }
            _ => None,
        };
        match (self, sub) {
            (CommandRequest::Token(crate::token_cmd::TokenCommand::Create { name, .. }), _) => {
                format!("token create {name}")
            }
            (CommandRequest::Token(crate::token_cmd::TokenCommand::Revoke { name }), _) => {
                format!("token revoke {name}")
            }
            (CommandRequest::Commit(c), _) => match &c.action {
                None => name,
                Some(CommitAction::Retire { .. }) => "commit retire".into(),
                Some(CommitAction::Show { .. }) => "commit show".into(),
            },
            (
                CommandRequest::Tag(_)
                | CommandRequest::Snapshot(_)
                | CommandRequest::Restore(_)
                | CommandRequest::Operation(_)
                | CommandRequest::Config(_)
                | CommandRequest::Token(_),
                Some(sub),
            ) => format!("{name} {sub}"),
            _ => name,
        }
    }
}

/// The workbench of a diff side (`WB` or `WB@SNAPSHOT`); `None` for a commit id.
fn diff_side_workbench(side: &str) -> Option<String> {
    let wb = side.split_once('@').map_or(side, |(w, _)| w);
    let commit_id = wb.len() == 64 && wb.bytes().all(|b| b.is_ascii_hexdigit());
    (!commit_id && !wb.is_empty()).then(|| wb.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req(name: &str, args: serde_json::Value) -> CommandRequest {
        CommandRequest::parse(name, args).unwrap()
    }

    #[test]
    fn workbench_commands_name_their_workbench_and_maintenance_needs_admin() {
        let rm = req(
            "rm",
            json!({"workbench": "run-1", "path": "a", "recursive": false, "expected_generation": null, "request_id": null}),
        );
        assert_eq!(rm.needs(), vec![(Action::Write, Some("run-1".into()))]);
        assert!(rm.mutates());
        let gc = req(
            "gc",
            json!({"dry_run": true, "max_revisions": null, "explain": null, "json": true}),
        );
        assert_eq!(gc.needs(), vec![(Action::Admin, None)]);
        let restore = req(
            "restore",
            json!({"Run": {"source": "a", "destination": "b", "snapshot": "1", "commit": null}}),
        );
        assert_eq!(
            restore.needs(),
            vec![
                (Action::Read, Some("a".into())),
                (Action::Lifecycle, Some("b".into()))
            ]
        );
        assert_eq!(diff_side_workbench("wb@snap"), Some("wb".into()));
        assert_eq!(diff_side_workbench(&"a".repeat(64)), None);
    }
}
