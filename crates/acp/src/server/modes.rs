//! Security modes and models as ACP session modes and config options.
//!
//! - The security modes are the policy's [`Mode::ALL`], named by [`mode_name`] and described by
//!   [`Mode::description`]. They are offered twice: as session modes
//!   (`availableModes`/`currentModeId`, for older clients) and as the `mode` select config
//!   option; both stay in sync.
//! - [`config_options`]: the complete option list (`mode`, then `model` when models are
//!   configured), as `session/new`, `session/set_config_option` and `config_option_update`
//!   carry it.

use agent_client_protocol::v1::schema::{
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption, SessionMode,
    SessionModeState,
};
use keel_core::policy::Mode;

/// The config option ids.
pub const MODE_OPTION: &str = "mode";
pub const MODEL_OPTION: &str = "model";
pub const THINKING_OPTION: &str = "thinking";

/// The `thinking` option: how much the model reasons before it answers.
pub fn thinking_option(level: keel_core::config::Thinking) -> SessionConfigOption {
    use keel_core::config::Thinking;
    let choices: Vec<SessionConfigSelectOption> = Thinking::ALL
        .iter()
        .map(|level| {
            let (name, description) = match level {
                Thinking::Off => ("Off", "No extended thinking"),
                Thinking::Low => ("Low", "A little reasoning first (Anthropic: 4096 tokens)"),
                Thinking::Medium => ("Medium", "More reasoning (Anthropic: 16384 tokens)"),
                Thinking::High => ("High", "The most reasoning (Anthropic: 32000 tokens)"),
            };
            SessionConfigSelectOption::new(level.as_str(), name).description(description.to_owned())
        })
        .collect();
    SessionConfigOption::select(THINKING_OPTION, "Thinking", level.as_str(), choices)
        .description("How much the model reasons before it answers")
        .category(SessionConfigOptionCategory::ThoughtLevel)
}

/// A mode's name in a picker.
pub fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Ask => "Ask",
        Mode::Allowlist => "Allowlist",
        Mode::Yolo => "Yolo",
        Mode::ReadOnly => "Read-only",
    }
}

/// A mode's description, as a sentence.
fn describe(mode: Mode) -> String {
    let text = mode.description();
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The session-mode state for `session/new`.
pub fn mode_state(current: Mode) -> SessionModeState {
    SessionModeState::new(
        current.as_str(),
        Mode::ALL
            .iter()
            .map(|mode| {
                SessionMode::new(mode.as_str(), mode_name(*mode)).description(describe(*mode))
            })
            .collect(),
    )
}

/// The complete config option list.
#[cfg(test)]
pub fn config_options(
    mode: Mode,
    model: Option<&str>,
    models: &[String],
) -> Vec<SessionConfigOption> {
    config_options_with_default(mode, model, models, None)
}

/// The complete config option list, the `default` model marked as such.
pub fn config_options_with_default(
    mode: Mode,
    model: Option<&str>,
    models: &[String],
    default: Option<&str>,
) -> Vec<SessionConfigOption> {
    let mode_choices: Vec<SessionConfigSelectOption> = Mode::ALL
        .iter()
        .map(|mode| {
            SessionConfigSelectOption::new(mode.as_str(), mode_name(*mode))
                .description(describe(*mode))
        })
        .collect();
    let mut options = vec![
        SessionConfigOption::select(MODE_OPTION, "Mode", mode.as_str(), mode_choices)
            .description("What the agent may do without asking")
            .category(SessionConfigOptionCategory::Mode),
    ];
    if !models.is_empty() {
        let current = model
            .filter(|m| models.iter().any(|known| known == m))
            .unwrap_or(&models[0]);
        let model_choices: Vec<SessionConfigSelectOption> = models
            .iter()
            .map(|id| {
                let choice = SessionConfigSelectOption::new(id.clone(), id.clone());
                if Some(id.as_str()) == default {
                    choice.description("The default model".to_owned())
                } else {
                    choice
                }
            })
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
        let options = config_options(Mode::Ask, Some("fast"), &["smart".into(), "fast".into()]);
        let wire = serde_json::to_value(&options).unwrap();
        assert_eq!(wire[0]["id"], "mode");
        assert_eq!(wire[0]["type"], "select");
        assert_eq!(wire[0]["category"], "mode");
        assert_eq!(wire[0]["currentValue"], "ask");
        assert_eq!(wire[0]["options"].as_array().unwrap().len(), 4);
        assert_eq!(wire[1]["id"], "model");
        assert_eq!(wire[1]["category"], "model");
        assert_eq!(wire[1]["currentValue"], "fast");
        assert_eq!(config_options(Mode::Yolo, None, &[]).len(), 1);
        let state = serde_json::to_value(mode_state(Mode::ReadOnly)).unwrap();
        insta::assert_json_snapshot!(state, @r#"
        {
          "currentModeId": "read-only",
          "availableModes": [
            {
              "id": "ask",
              "name": "Ask",
              "description": "Ask before every new command, edit or fetch"
            },
            {
              "id": "allowlist",
              "name": "Allowlist",
              "description": "The permission rules decide; unknown calls ask"
            },
            {
              "id": "yolo",
              "name": "Yolo",
              "description": "Never ask; deny rules and the watchdog still refuse"
            },
            {
              "id": "read-only",
              "name": "Read-only",
              "description": "Plan only: anything that may change files is refused"
            }
          ]
        }
        "#);
    }
}
