//! [`Mode`]: how much the engine asks.
//!
//! - `ask`: every gated call asks the first time its key is seen; "always" answers given in
//!   the session still apply, allow rules from files do not.
//! - `allowlist` (the default): the rules decide.
//! - `yolo`: what the rules would ask about is allowed; deny rules and the watchdog still deny.
//! - `read-only`: planning; every call that may change something is denied, reading goes on
//!   under the rules.
//!
//! No mode skips the capability check or a watchdog denial.

//!
//! This is the one definition: the configuration's `mode` key (serde and JSON Schema derived
//! here, exact names), `KEEL_MODE`, `--mode`, ACP `session/set_mode` and `/mode` (the lenient
//! [`FromStr`]: case, `_` for `-`, `readonly`) all name this type.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How tool calls are approved (seed 001's security modes, plus read-only).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Ask the user about every gated call not covered by a rule or an earlier "always".
    Ask,
    /// Allow read-only calls and calls matching allow rules; ask about the rest. The default.
    #[default]
    Allowlist,
    /// Allow everything the capability scope allows, without asking. Deny rules still apply.
    Yolo,
    /// Deny every mutating call.
    ReadOnly,
}

impl Mode {
    /// Every mode, in documentation order.
    pub const ALL: [Mode; 4] = [Mode::Ask, Mode::Allowlist, Mode::Yolo, Mode::ReadOnly];
    /// Every mode's name, in documentation order.
    pub const NAMES: [&'static str; 4] = ["ask", "allowlist", "yolo", "read-only"];

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Ask => "ask",
            Mode::Allowlist => "allowlist",
            Mode::Yolo => "yolo",
            Mode::ReadOnly => "read-only",
        }
    }

    /// Whether `self` lets through without asking nothing that `other` would not: every call
    /// `other` asks about, `self` asks about or refuses, and every call `other` refuses, `self`
    /// refuses. A partial order: `yolo` < `allowlist` < `ask`, and `allowlist` < `read-only`,
    /// but `ask` and `read-only` are not comparable (`read-only` runs a read-only command or a
    /// fetch a rule allows without asking, which `ask` asks about; `ask` runs a change once the
    /// user agrees, which `read-only` refuses).
    pub fn at_least_as_strict_as(self, other: Mode) -> bool {
        match (self, other) {
            (a, b) if a == b => true,
            (_, Mode::Yolo) => true,
            (Mode::Ask | Mode::ReadOnly, Mode::Allowlist) => true,
            _ => false,
        }
    }

    /// A subagent's mode held within its session's: the stricter of the two, and when neither
    /// is stricter (`ask` and `read-only`), the session's, so the child is never looser than
    /// its session.
    pub fn within(self, session: Mode) -> Mode {
        if self.at_least_as_strict_as(session) {
            self
        } else {
            session
        }
    }

    /// One line for a mode picker.
    pub fn description(self) -> &'static str {
        match self {
            Mode::Ask => "ask before every new command, edit or fetch",
            Mode::Allowlist => "the permission rules decide; unknown calls ask",
            Mode::Yolo => "never ask; deny rules and the watchdog still refuse",
            Mode::ReadOnly => "plan only: anything that may change files is refused",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A mode name that is not one of ask, allowlist, yolo, read-only.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown mode `{0}`: use ask, allowlist, yolo or read-only")]
pub struct UnknownMode(pub String);

impl FromStr for Mode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "ask" => Ok(Mode::Ask),
            "allowlist" => Ok(Mode::Allowlist),
            "yolo" => Ok(Mode::Yolo),
            "read-only" | "readonly" => Ok(Mode::ReadOnly),
            _ => Err(UnknownMode(s.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for mode in Mode::ALL {
            assert_eq!(mode.to_string().parse::<Mode>().unwrap(), mode);
        }
        assert_eq!("READ_ONLY".parse::<Mode>().unwrap(), Mode::ReadOnly);
        assert!(
            "yes"
                .parse::<Mode>()
                .unwrap_err()
                .to_string()
                .contains("allowlist")
        );
        assert_eq!(Mode::default(), Mode::Allowlist);
    }

    #[test]
    fn the_file_form_is_the_exact_names_and_every_name_parses() {
        for (mode, name) in Mode::ALL.into_iter().zip(Mode::NAMES) {
            assert_eq!(mode.as_str(), name);
            assert_eq!(serde_json::to_value(mode).unwrap(), serde_json::json!(name));
            assert_eq!(
                serde_json::from_value::<Mode>(serde_json::json!(name)).unwrap(),
                mode
            );
            assert_eq!(name.parse::<Mode>().unwrap(), mode);
        }
        // The lenient spellings are for typed names (`/mode`, `session/set_mode`), not files.
        assert!(serde_json::from_value::<Mode>(serde_json::json!("readonly")).is_err());
        assert_eq!("readonly".parse::<Mode>().unwrap(), Mode::ReadOnly);
    }
}
