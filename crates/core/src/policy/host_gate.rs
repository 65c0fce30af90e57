//! The hosts confined commands may reach: the session's `shell.net` rules, asked by the
//! sandbox's filtering proxy through [`PolicyHostGate`].

use super::Policy;
use super::evaluate::evaluate_call;
use super::layers::Layer;
use super::mode::Mode;
use super::rule::{Action, Capability, Rule};
use super::shell::ShellContext;
use super::subject::CallSubject;
use super::watchdog::Watchdog;

/// The sandbox's filtering proxy asks the session's rules which hosts confined commands may
/// reach: the `shell.net` rules, a permission of their own. A rule or an answer for `web_fetch`
/// or `net.fetch` never opens it (each answer opens only the door it names). Only an allow
/// counts (a command cannot wait on a prompt); the mode does not open anything (`yolo` turns
/// prompts into allows for calls, not for a command's connections), and in `ask` mode nothing
/// is reached.
impl Policy {
    /// Whether any rule allows some host to `web_fetch` without asking.
    pub fn commands_reach_any_host(&self) -> bool {
        let (rules, trusted, mode) = self.host_rules();
        mode != Mode::Ask
            && rules.iter().any(|rule| {
                rule.action == Action::Allow
                    && rule
                        .permission
                        .matches(COMMAND_HOST_TOOL, Some(Capability::ShellNet))
                    && (trusted || rule.source.layer() != Layer::Project)
            })
    }

    /// `Ok` when the rules allow `host` without asking; otherwise why not.
    // String error: the reason the proxy puts as it is in its `403`.
    pub fn command_host(&self, host: &str) -> Result<(), String> {
        let (rules, trusted, mode) = self.host_rules();
        if mode == Mode::Ask {
            return Err("the session's mode is `ask`, which asks before every fetch".into());
        }
        let rules: Vec<&Rule> = rules.iter().collect();
        let context = ShellContext {
            roots: &[],
            home: None,
            runtime: None,
            scratch: None,
        };
        let watchdog = Watchdog {
            context,
            protected: &[],
        };
        let outcome = evaluate_call(
            &rules,
            trusted,
            COMMAND_HOST_TOOL,
            Some(Capability::ShellNet),
            &CallSubject::Host(host.to_owned()),
            &watchdog,
        );
        match outcome.action {
            Action::Allow => Ok(()),
            Action::Ask => Err(format!(
                "no shell.net rule lets shell commands reach {host} (a web_fetch answer does \
                 not); to allow it, a rule `permission = \"shell.net\"`, `pattern = \"{host}\"`, \
                 `action = \"allow\"`"
            )),
            Action::Deny => Err(format!("the shell.net rules deny {host}")),
        }
    }
}

/// The permission whose rules decide a confined command's hosts (no tool has this id, so only
/// `shell.net` rules and `*` match it).
const COMMAND_HOST_TOOL: &str = "shell.net";

/// [`Policy`] as the sandbox proxy's [`HostGate`](crate::runtime::sandbox::proxy::HostGate).
#[derive(Debug, Clone)]
pub struct PolicyHostGate(pub std::sync::Arc<Policy>);

impl crate::runtime::sandbox::proxy::HostGate for PolicyHostGate {
    fn any_allowed(&self) -> bool {
        self.0.commands_reach_any_host()
    }

    // String error: the reason the proxy puts as it is in its `403`.
    fn check(&self, host: &str) -> Result<(), String> {
        self.0.command_host(host)
    }
}
