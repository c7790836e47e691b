//! Runs nodes as OS processes, each in its own process group, and speaks the node protocol to
//! them: sends the configuration and commands as JSON lines on stdin, reads events from stdout
//! and stamps each on receipt with CLOCK_MONOTONIC. A line that is not a protocol event is
//! reported as such (the run is then inconclusive), never crashed into. Any executable can be a
//! node. Signals (SIGSTOP, SIGCONT, SIGKILL) go to the node's whole process group; dropping a
//! `NodeProcess` kills the group.

use std::process::Stdio;
use std::time::Duration;

use futures_util::StreamExt;
use leasequake_reports::history::{
    protocol_supported, EventKind, NodeCommand, NodeConfig, NodeEvent, PROTOCOL_VERSION, PROTOCOL_VERSION_MIN,
};
use rustix::process::{kill_process_group, Pid, Signal};
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, LinesCodec};

use crate::clock::mono_ns;
use crate::error::HarnessError;

const LINE_LIMIT: usize = 1 << 20;
const COMMAND_QUEUE: usize = 256;

/// One line a node wrote, as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// Node id.
    pub node: String,
    /// The node's incarnation (1, then one more per restart).
    pub incarnation: u64,
    /// The harness's CLOCK_MONOTONIC at receipt, ns.
    pub received_ns: u64,
    /// The event, or the raw line and why it is not one.
    pub line: Result<NodeEvent, Garbage>,
}

/// A line that is not a protocol event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Garbage {
    /// The line (cut at 200 characters).
    pub raw: String,
    /// Why it was refused.
    pub why: String,
}

/// What the runner needs to reach a running node from any task: its name, pid, command queue.
#[derive(Clone, Debug)]
pub struct NodeHandle {
    node: String,
    pid: i32,
    commands: mpsc::Sender<NodeCommand>,
}

impl NodeHandle {
    /// The node's id.
    #[must_use]
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The node's process (and group) id.
    #[must_use]
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Queues a command for the node.
    pub fn send(&self, command: NodeCommand) -> Result<(), HarnessError> {
        self.commands
            .try_send(command)
            .map_err(|e| HarnessError::NodeProtocol { detail: format!("cannot send to node {}: {e}", self.node) })
    }

    /// Sends `signal` to the node's process group.
    pub fn signal(&self, signal: Signal) -> Result<(), HarnessError> {
        let pid = Pid::from_raw(self.pid).ok_or_else(|| HarnessError::NodeProtocol { detail: "bad pid".into() })?;
        kill_process_group(pid, signal)
            .map_err(|e| HarnessError::NodeProtocol { detail: format!("cannot signal node {}: {e}", self.node) })
    }
}

/// A running node.
pub struct NodeProcess {
    handle: NodeHandle,
    child: Child,
}

impl NodeProcess {
    /// Starts `command` (program and arguments) as node `config.node`, sends it `config`, and
    /// forwards what it writes to `events`. Its stderr goes to `stderr` (a log file, say).
    pub fn spawn(
        command: &[String],
        config: NodeConfig,
        events: mpsc::Sender<Received>,
        stderr: Stdio,
    ) -> Result<Self, HarnessError> {
        Self::spawn_with_env(command, config, events, stderr, &[])
    }

    /// [`NodeProcess::spawn`], with these variables added to the node's environment.
    pub fn spawn_with_env(
        command: &[String],
        config: NodeConfig,
        events: mpsc::Sender<Received>,
        stderr: Stdio,
        env: &[(String, String)],
    ) -> Result<Self, HarnessError> {
        let node = config.node.clone();
        let incarnation = config.incarnation;
        let failed = |detail: String| HarnessError::NodeProtocol { detail };
        let (program, args) = command.split_first().ok_or_else(|| failed("empty node command".into()))?;
        let mut child = Command::new(program)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                failed(format!("cannot start node {node} with `{}`: {e} (check the node command)", command.join(" ")))
            })?;
        let pid = child
            .id()
            .and_then(|p| i32::try_from(p).ok())
            .ok_or_else(|| failed(format!("node {node} exited at once")))?;
        let mut stdin = child.stdin.take().ok_or_else(|| failed("no stdin pipe".into()))?;
        let stdout = child.stdout.take().ok_or_else(|| failed("no stdout pipe".into()))?;

        let (tx, mut rx) = mpsc::channel::<NodeCommand>(COMMAND_QUEUE);
        // Writer: ends (closing the node's stdin) when the NodeProcess is dropped.
        tokio::spawn(async move {
            while let Some(cmd) = rx.recv().await {
                let mut line = serde_json::to_string(&cmd).unwrap_or_default();
                line.push('\n');
                if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
                    return;
                }
            }
        });
        // Reader: ends at the node's EOF.
        let name = node.clone();
        tokio::spawn(async move {
            let mut lines = FramedRead::new(stdout, LinesCodec::new_with_max_length(LINE_LIMIT));
            // The version the node announced (the strictest token rule until it has).
            let mut protocol = PROTOCOL_VERSION_MIN;
            while let Some(line) = lines.next().await {
                let received_ns = mono_ns();
                let line = match line {
                    Ok(l) => parse_event(&l).and_then(|e| {
                        if let EventKind::Hello { protocol: p, .. } = &e.kind {
                            protocol = *p;
                        }
                        token_rule(&name, protocol, e, &l)
                    }),
                    Err(e) => Err(Garbage { raw: String::new(), why: e.to_string() }),
                };
                if events.send(Received { node: name.clone(), incarnation, received_ns, line }).await.is_err() {
                    return;
                }
            }
        });
        let process = Self { handle: NodeHandle { node, pid, commands: tx }, child };
        process.send(NodeCommand::Config(Box::new(config)))?;
        Ok(process)
    }

    /// The node's id.
    #[must_use]
    pub fn node(&self) -> &str {
        self.handle.node()
    }

    /// The node's process (and group) id.
    #[must_use]
    pub fn pid(&self) -> i32 {
        self.handle.pid()
    }

    /// A handle other tasks can keep (commands and signals, not the process's life).
    #[must_use]
    pub fn handle(&self) -> NodeHandle {
        self.handle.clone()
    }

    /// Queues a command for the node.
    pub fn send(&self, command: NodeCommand) -> Result<(), HarnessError> {
        self.handle.send(command)
    }

    /// Sends `signal` to the node's process group (SIGSTOP freezes it, renewal included).
    pub fn signal(&self, signal: Signal) -> Result<(), HarnessError> {
        self.handle.signal(signal)
    }

    /// Asks the node to stop and waits up to `grace` for it to exit; kills the group after.
    /// Returns whether it exited by itself.
    pub async fn stop(mut self, grace: Duration) -> bool {
        let _ = self.signal(Signal::CONT); // a paused node cannot hear `stop`
        let _ = self.send(NodeCommand::Stop);
        let exited = tokio::time::timeout(grace, self.child.wait()).await.is_ok();
        if !exited {
            let _ = self.signal(Signal::KILL);
            let _ = self.child.wait().await;
        }
        exited
    }

    /// Kills the node's group (SIGKILL) and reaps it.
    pub async fn kill(mut self) {
        let _ = self.signal(Signal::KILL);
        let _ = self.child.wait().await;
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        // The backstop: the whole group, not just the leader.
        if let Some(pid) = Pid::from_raw(self.handle.pid) {
            let _ = kill_process_group(pid, Signal::KILL);
        }
    }
}

/// Parses one node line; anything not an event of a protocol version the harness speaks is garbage.
pub fn parse_event(line: &str) -> Result<NodeEvent, Garbage> {
    let garbage = |why: String| Garbage { raw: line.chars().take(200).collect(), why };
    let event: NodeEvent = serde_json::from_str(line).map_err(|e| garbage(e.to_string()))?;
    if let EventKind::Hello { protocol, lease_key, renewals, .. } = &event.kind {
        if !protocol_supported(*protocol) {
            return Err(garbage(format!(
                "node speaks protocol {protocol}, the harness {PROTOCOL_VERSION_MIN} to {PROTOCOL_VERSION}"
            )));
        }
        if *protocol < 3 && (lease_key.is_some() || renewals.is_some()) {
            return Err(garbage(format!(
                "`lease_key` and `renewals` in `hello` are protocol 3; the node announced protocol {protocol}"
            )));
        }
        if let Some(why) = lease_key.as_deref().and_then(key_problem) {
            return Err(garbage(why));
        }
    }
    Ok(event)
}

/// Why `key` cannot be a declared lease key: the harness sends it to `redis-cli` as one word.
fn key_problem(key: &str) -> Option<String> {
    let bad = key.is_empty() || key.len() > KEY_MAX_BYTES || key.chars().any(|c| c.is_whitespace() || c.is_control());
    bad.then(|| {
        format!(
            "lease_key {:?}: a key is 1 to {KEY_MAX_BYTES} bytes with no whitespace or control characters",
            key.chars().take(80).collect::<String>()
        )
    })
}

/// The longest lease key a node may declare, in bytes.
const KEY_MAX_BYTES: usize = 512;

/// An event whose token breaks the token rule (docs/node-protocol.md) is refused as garbage, which
/// makes the run inconclusive with the reason: the harness follows a node's lease in Redis by its
/// token's prefix and would otherwise read the node's key as nobody's.
fn token_rule(node: &str, protocol: u32, event: NodeEvent, line: &str) -> Result<NodeEvent, Garbage> {
    match event.kind.token().and_then(|t| leasequake_reports::history::token_problem(node, t, protocol)) {
        Some(why) => Err(Garbage { raw: line.chars().take(200).collect(), why }),
        None => Ok(event),
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_event, token_rule};

    #[test]
    fn a_token_that_does_not_name_its_node_is_refused_with_the_rule() {
        let line = r#"{"mono_ns":1,"round":1,"type":"acquired","token":"lock:5f3a","fence":1}"#;
        let why = token_rule("n1", 2, parse_event(line).unwrap(), line).unwrap_err().why;
        assert!(why.contains("`n1/`") && why.contains("docs/node-protocol.md"), "{why}");
        assert!(token_rule("n1", 3, parse_event(line).unwrap(), line).is_ok(), "protocol 3 lifts the prefix rule");
        let line = r#"{"mono_ns":1,"round":1,"type":"acquired","token":"n12/1/0/x","fence":1}"#;
        assert!(token_rule("n1", 1, parse_event(line).unwrap(), line).is_err(), "n12 is not n1");
        let line = r#"{"mono_ns":1,"round":1,"type":"acquired","token":"n1/1/0/x","fence":1}"#;
        assert!(token_rule("n1", 2, parse_event(line).unwrap(), line).is_ok());
        let line = r#"{"mono_ns":1,"round":1,"type":"acquired","token":"a b","fence":1}"#;
        assert!(token_rule("n1", 3, parse_event(line).unwrap(), line).is_err(), "whitespace, under any version");
        let line = r#"{"mono_ns":1,"round":1,"type":"stopped"}"#;
        assert!(token_rule("n1", 1, parse_event(line).unwrap(), line).is_ok(), "no token, nothing to check");
    }

    #[test]
    fn garbage_and_unknown_events_are_refused_with_the_reason() {
        assert!(parse_event(r#"{"mono_ns":1,"round":0,"type":"stopped"}"#).is_ok());
        let unknown = parse_event(r#"{"mono_ns":1,"round":0,"type":"teleported"}"#).unwrap_err();
        assert!(unknown.why.contains("teleported"), "{unknown:?}");
        let extra = parse_event(r#"{"mono_ns":1,"round":0,"type":"acquired","token":"a","fence":1,"bonus":2}"#);
        assert!(extra.is_err(), "unknown fields are refused");
        assert!(parse_event("hello world").is_err());
        let old =
            parse_event(r#"{"mono_ns":1,"round":0,"type":"hello","protocol":0,"implementation":"x"}"#).unwrap_err();
        assert!(old.why.contains("protocol 0"));
        for version in [1, 2, 3, 4] {
            let line = format!(r#"{{"mono_ns":1,"round":0,"type":"hello","protocol":{version},"implementation":"x"}}"#);
            assert!(parse_event(&line).is_ok(), "protocol {version} is spoken");
        }
        let newer =
            parse_event(r#"{"mono_ns":1,"round":0,"type":"hello","protocol":5,"implementation":"x"}"#).unwrap_err();
        assert!(newer.why.contains("protocol 5"), "{newer:?}");
        let declared = r#"{"mono_ns":1,"round":0,"type":"hello","protocol":3,"implementation":"x","lease_key":"lock:t1","renewals":"hidden"}"#;
        assert!(parse_event(declared).is_ok());
        let early = parse_event(&declared.replace("\"protocol\":3", "\"protocol\":2")).unwrap_err();
        assert!(early.why.contains("protocol 3"), "{early:?}");
        let spaced = parse_event(&declared.replace("lock:t1", "lock t1")).unwrap_err();
        assert!(spaced.why.contains("lease_key"), "{spaced:?}");
        assert!(parse_event(&declared.replace("hidden", "sometimes")).is_err(), "renewals: reported or hidden");
    }
}
