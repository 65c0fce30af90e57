//! What a tool run produces, and the uniform envelope every consumer sees.

use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::contract::{InternalError, ToolError};

/// Where a todo item stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
}

/// How much a todo item matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoPriority {
    High,
    Medium,
    Low,
}

/// One entry of the session's plan (the todo list) as a front-end draws it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanEntry {
    pub content: String,
    pub priority: TodoPriority,
    pub status: TodoStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// Something a front-end draws beside the text: a diff, a plan, a terminal, a location.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum Artifact {
    /// A file change, in the diff crate's bounded ACP form: the full old and new text for the
    /// editor's inline diff up to 1 MiB a side, only the changed parts past it (`bounded`).
    /// `old_text` is `None` for a new file; `path` is absolute.
    Diff(keel_diff::AcpDiff),
    /// The session's todo list, whole.
    Plan { entries: Vec<PlanEntry> },
    /// How a command ended: its exit code (`None` when a signal ended it).
    Exit { code: Option<i32> },
    /// A terminal the host created for this call (ACP `terminal/create`).
    Terminal { terminal_id: String },
    /// A place in a file the call touched.
    Location { path: String, line: Option<u32> },
    /// A failure of Keel itself during the call, for the user (the model got a neutral
    /// message): what Keel was doing and the whole source chain.
    InternalError { report: String },
}

/// A successful run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolOutput {
    /// The main payload the model reads (file text with line numbers, matches, command output).
    /// Already capped by the tool; the full text went to `output_path`.
    pub text: String,
    /// Structured extras (exit code, counts, ...), included in the envelope's `data`.
    pub data: Map<String, Value>,
    /// For the front-end only; never sent to the model.
    pub artifacts: Vec<Artifact>,
    /// Set when `text` is a head and the whole output was written to a sidecar file.
    pub output_path: Option<PathBuf>,
}

impl ToolOutput {
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }

    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.data.insert(key.to_owned(), value.into());
        self
    }

    pub fn artifact(mut self, artifact: Artifact) -> Self {
        self.artifacts.push(artifact);
        self
    }
}

/// `type` of an [`Envelope`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvelopeKind {
    Output,
    Error,
}

/// Envelope metadata.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    pub duration_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_path: Option<String>,
    /// Set when the model called the tool by another agent's name or argument names (an
    /// alias, `tools::aliases`): which name ran and which to use.
    #[serde(
        rename = "_deprecation",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub deprecation: Option<Deprecation>,
}

/// The `_deprecation` block of a result reached through an alias.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deprecation {
    /// The name the model called.
    pub this_tool: String,
    /// The tool that ran, the one to call.
    pub use_instead: String,
    /// One sentence for the model: what ran and how to call it next time.
    pub message: String,
}

/// The uniform tool result: `{type, data | error_text, metadata}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    #[serde(rename = "type")]
    pub kind: EnvelopeKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_text: Option<String>,
    pub metadata: Metadata,
    /// Front-end artifacts; not part of the wire envelope.
    #[serde(skip)]
    pub artifacts: Vec<Artifact>,
}

impl Envelope {
    /// Builds the envelope of a finished run.
    pub fn from_result(result: Result<ToolOutput, ToolError>, elapsed: Duration) -> Self {
        let duration_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        match result {
            Ok(output) => {
                let truncated = output.output_path.is_some();
                let mut data = output.data;
                let key = if truncated { "head" } else { "output" };
                data.insert(key.to_owned(), Value::String(output.text));
                Envelope {
                    kind: EnvelopeKind::Output,
                    data: Some(Value::Object(data)),
                    error_text: None,
                    metadata: Metadata {
                        duration_ms,
                        truncated: truncated.then_some(true),
                        output_path: output.output_path.map(|p| p.display().to_string()),
                        deprecation: None,
                    },
                    artifacts: output.artifacts,
                }
            }
            Err(ToolError::Internal(internal)) => {
                let mut envelope = Envelope::error(InternalError::FOR_MODEL, duration_ms);
                envelope.artifacts.push(Artifact::InternalError {
                    report: internal.report(),
                });
                envelope
            }
            Err(error) => Envelope::error(error.to_string(), duration_ms),
        }
    }

    pub fn error(text: impl Into<String>, duration_ms: u64) -> Self {
        Envelope {
            kind: EnvelopeKind::Error,
            data: None,
            error_text: Some(text.into()),
            metadata: Metadata {
                duration_ms,
                ..Metadata::default()
            },
            artifacts: Vec::new(),
        }
    }

    /// The details of a failure of Keel itself, when the call had one (for the user only).
    pub fn internal_error(&self) -> Option<&str> {
        self.artifacts.iter().find_map(|artifact| match artifact {
            Artifact::InternalError { report } => Some(report.as_str()),
            _ => None,
        })
    }

    pub fn is_error(&self) -> bool {
        self.kind == EnvelopeKind::Error
    }

    /// The main text (`output`, `head` or `error_text`).
    pub fn text(&self) -> &str {
        if let Some(text) = &self.error_text {
            return text;
        }
        self.data
            .as_ref()
            .and_then(|d| d.get("output").or_else(|| d.get("head")))
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// The text the model reads: the payload, then the structured extras and the truncation
    /// notice on their own lines. An error is its text alone: the providers mark it as an error
    /// (Anthropic's `is_error`, an `Error: ` prefix for OpenAI).
    pub fn for_model(&self) -> String {
        if let Some(text) = &self.error_text {
            let mut out = text.clone();
            self.push_deprecation(&mut out);
            return out;
        }
        let mut out = self.text().to_owned();
        if let Some(Value::Object(data)) = &self.data {
            let extras: Vec<String> = data
                .iter()
                .filter(|(k, _)| k.as_str() != "output" && k.as_str() != "head")
                .map(|(k, v)| match v {
                    Value::String(s) => format!("{k}: {s}"),
                    other => format!("{k}: {other}"),
                })
                .collect();
            if !extras.is_empty() {
                if !out.is_empty() && !out.ends_with('\n') {
                    out.push('\n');
                }
                out.push_str(&format!("[{}]", extras.join(", ")));
            }
        }
        if let Some(path) = &self.metadata.output_path {
            if !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&format!(
                "[output truncated: the whole output is in {path}; read it with the `read` tool (offset/limit) if you need more]"
            ));
        }
        self.push_deprecation(&mut out);
        out
    }

    /// The `_deprecation` block on a line of its own, as the metadata holds it.
    fn push_deprecation(&self, out: &mut String) {
        let Some(block) = &self.metadata.deprecation else {
            return;
        };
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        let json = serde_json::json!({ "_deprecation": block });
        out.push_str(&format!("[{json}]"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_envelope_shape() {
        let env = Envelope::from_result(
            Ok(ToolOutput::text("hello").with("exit_code", 0)),
            Duration::from_millis(12),
        );
        let json = serde_json::to_value(&env).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"type":"output","data":{"exit_code":0,"output":"hello"},"metadata":{"duration_ms":12}})
        );
        assert_eq!(env.for_model(), "hello\n[exit_code: 0]");
    }

    #[test]
    fn truncated_envelope_carries_head_and_path() {
        let out = ToolOutput {
            text: "head".into(),
            output_path: Some("/s/x.txt".into()),
            ..Default::default()
        };
        let env = Envelope::from_result(Ok(out), Duration::ZERO);
        let json = serde_json::to_value(&env).unwrap();
        assert_eq!(json["data"]["head"], "head");
        assert_eq!(json["metadata"]["truncated"], true);
        assert_eq!(json["metadata"]["output_path"], "/s/x.txt");
        assert!(env.for_model().contains("/s/x.txt"));
    }

    #[test]
    fn a_deprecation_block_is_in_the_metadata_and_the_model_s_copy() {
        let block = Deprecation {
            this_tool: "Read".into(),
            use_instead: "read".into(),
            message: "Call `read`.".into(),
        };
        for result in [
            Ok(ToolOutput::text("text")),
            Err(ToolError::external("boom")),
        ] {
            let mut env = Envelope::from_result(result, Duration::ZERO);
            let plain = serde_json::to_value(&env).unwrap();
            assert!(plain["metadata"].get("_deprecation").is_none(), "{plain}");
            env.metadata.deprecation = Some(block.clone());
            let json = serde_json::to_value(&env).unwrap();
            assert_eq!(json["metadata"]["_deprecation"]["use_instead"], "read");
            let model = env.for_model();
            assert!(
                model.ends_with(
                    "\n[{\"_deprecation\":{\"this_tool\":\"Read\",\"use_instead\":\"read\",\"message\":\"Call `read`.\"}}]"
                ),
                "{model}"
            );
            let back: Envelope = serde_json::from_value(json).unwrap();
            assert_eq!(back.metadata.deprecation, Some(block.clone()));
        }
    }

    #[test]
    fn error_envelope_shape() {
        let env = Envelope::from_result(Err(ToolError::external("boom")), Duration::ZERO);
        let json = serde_json::to_value(&env).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"type":"error","error_text":"boom","metadata":{"duration_ms":0}})
        );
        assert_eq!(env.for_model(), "boom");
        assert_eq!(env.internal_error(), None);
    }

    #[test]
    fn an_internal_error_gives_the_model_a_neutral_message_and_the_user_the_chain() {
        let io = std::io::Error::new(std::io::ErrorKind::NotADirectory, "/state/x: not a dir");
        let error = ToolError::internal("writing a sidecar file", io);
        assert_eq!(error.to_string(), InternalError::FOR_MODEL);
        let env = Envelope::from_result(Err(error), Duration::ZERO);
        assert!(env.is_error());
        assert_eq!(env.for_model(), InternalError::FOR_MODEL);
        let json = serde_json::to_value(&env).unwrap();
        assert!(!json.to_string().contains("/state/x"), "{json}");
        assert_eq!(
            env.internal_error(),
            Some("internal error in Keel while writing a sidecar file: /state/x: not a dir")
        );
    }

    #[test]
    fn model_facing_errors_keep_their_source() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        let error = ToolError::io("a.txt: permission denied", io);
        assert_eq!(error.to_string(), "a.txt: permission denied");
        let source = std::error::Error::source(&error).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("denied"));
    }
}
