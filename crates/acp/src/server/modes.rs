//! Security modes and models as ACP session modes and config options.
//!
//! - [`MODES`]: the security modes with their names and descriptions. They are offered twice:
//!   as session modes (`availableModes`/`currentModeId`, for older clients) and as the `mode`
//!   select config option; both stay in sync.
//! - [`config_options`]: the complete option list (`mode`, then `model` when models are
//!   configured), as `session/new`, `session/set_config_option` and `config_option_update`
//!   carry it.

use agent_client_protocol::v1::schema::{
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption, SessionMode,
    SessionModeState,
};

/// A security mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModeRow {
    pub id: &'static str,
    pub name: &'static str,
    pub description: &'static str,
}

/// The security modes, in display order.
pub const MODES: [ModeRow; 4] = [
    ModeRow {
        id: "ask",
        name: "Ask",
        description: "Ask before gated calls (edits, commands, fetches); approvals are remembered for the session",
    },
    ModeRow {
        id: "allowlist",
        name: "Allowlist",
        description: "Run calls that match the allowlist rules without asking; ask for the rest",
    },
    ModeRow {
        id: "yolo",
        name: "Yolo",
        description: "Run every call the workspace scope allows without asking (deny rules still apply)",
    },
    ModeRow {
        id: "read-only",
        name: "Read-only",
        description: "Read and search only; edits, writes and commands are refused",
    },
];

/// The config option ids.
pub const MODE_OPTION: &str = "mode";
pub const MODEL_OPTION: &str = "model";

pub fn find_mode(id: &str) -> Option<&'static ModeRow> {
    MODES.iter().find(|mode| mode.id == id)
}

/// The session-mode state for `session/new`.
pub fn mode_state(current: &str) -> SessionModeState {
    SessionModeState::new(
        current.to_owned(),
        MODES
            .iter()
            .map(|mode| SessionMode::new(mode.id, mode.name).description(mode.description))
            .collect(),
    )
}

/// The complete config option list.
pub fn config_options(
    mode: &str,
    model: Option<&str>,
    models: &[String],
) -> Vec<SessionConfigOption> {
    let mode_choices: Vec<SessionConfigSelectOption> = MODES
        .iter()
        .map(|row| SessionConfigSelectOption::new(row.id, row.name).description(row.description))
        .collect();
    let mut options = vec![
        SessionConfigOption::select(MODE_OPTION, "Mode", mode.to_owned(), mode_choices)
            .description("What the agent may do without asking")
            .category(SessionConfigOptionCategory::Mode),
    ];
    if !models.is_empty() {
        let current = model
            .filter(|m| models.iter().any(|known| known == m))
            .unwrap_or(&models[0]);
        let model_choices: Vec<SessionConfigSelectOption> = models
            .iter()
            .map(|id| SessionConfigSelectOption::new(id.clone(), id.clone()))
            .collect();
        options.push(
            SessionConfigOption::select(MODEL_OPTION, "Model", current.to_owned(), model_choices)
                .category(SessionConfigOptionCategory::Model),
        );
    }
    options
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_wire_shape() {
        let options = config_options("ask", Some("fast"), &["smart".into(), "fast".into()]);
        let wire = serde_json::to_value(&options).unwrap();
        assert_eq!(wire[0]["id"], "mode");
        assert_eq!(wire[0]["type"], "select");
        assert_eq!(wire[0]["category"], "mode");
        assert_eq!(wire[0]["currentValue"], "ask");
        assert_eq!(wire[0]["options"].as_array().unwrap().len(), 4);
        assert_eq!(wire[1]["id"], "model");
        assert_eq!(wire[1]["category"], "model");
        assert_eq!(wire[1]["currentValue"], "fast");
        assert_eq!(config_options("yolo", None, &[]).len(), 1);
        let state = serde_json::to_value(mode_state("read-only")).unwrap();
        assert_eq!(state["currentModeId"], "read-only");
        assert_eq!(state["availableModes"][3]["id"], "read-only");
    }
}
