//! [`McpTool`]: one tool of an MCP server, under the bundled tools' contract.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::model::{CallToolRequestParams, CallToolResponse};
use rmcp::service::{Peer, RoleClient};
use serde_json::Value;

use crate::tool::{
    DynTool, JsonTool, Origin, ToolContext, ToolError, ToolKind, ToolOutput, ToolSpec,
};

/// An MCP tool whose input schema does not compile: the server's other tools still load.
#[derive(Debug, thiserror::Error)]
#[error("tool `{tool}` has an invalid input schema: {source}")]
pub struct InvalidSchema {
    tool: String,
    #[source]
    source: Box<jsonschema::ValidationError<'static>>,
}

/// The longest tool id the registry accepts.
const MAX_ID: usize = 64;

/// How much of a call's text the model sees; the rest goes to a sidecar file.
pub const OUTPUT_BYTES: usize = 100 * 1024;

/// `[a-zA-Z0-9_-]` only: anything else becomes `_`.
pub fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The flat id of a server's tool: `mcp__SERVER__TOOL` (sanitized, at most 64 characters).
pub fn tool_id(server: &str, tool: &str) -> String {
    let mut id = format!("mcp__{}__{}", sanitize(server), sanitize(tool));
    id.truncate(MAX_ID);
    id
}

/// The ACP kind and mutability an MCP tool's annotations hint at: read-only → read (search when
/// the name says so), destructive → delete or edit, anything else → other (and mutating).
pub fn kind_of(name: &str, read_only: Option<bool>, destructive: Option<bool>) -> (ToolKind, bool) {
    let lower = name.to_ascii_lowercase();
    if read_only == Some(true) {
        let search = ["search", "find", "grep", "query", "lookup"]
            .iter()
            .any(|word| lower.contains(word));
        return (
            if search {
                ToolKind::Search
            } else {
                ToolKind::Read
            },
            false,
        );
    }
    if destructive == Some(true) {
        let delete = ["delete", "remove", "drop", "destroy"]
            .iter()
            .any(|word| lower.contains(word));
        return (
            if delete {
                ToolKind::Delete
            } else {
                ToolKind::Edit
            },
            true,
        );
    }
    (ToolKind::Other, true)
}

/// One tool of a running MCP server.
pub struct McpTool {
    spec: ToolSpec,
    /// The tool's name on the server.
    remote: String,
    server: String,
    peer: Peer<RoleClient>,
    validator: jsonschema::Validator,
    timeout: Duration,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("id", &self.spec.id)
            .finish()
    }
}

impl McpTool {
    /// Wraps a listed tool. A schema that does not compile (draft-07 and 2020-12 both do) is
    /// an error naming the tool; the server's other tools still load.
    pub fn wrap(
        server: &str,
        tool: &rmcp::model::Tool,
        peer: Peer<RoleClient>,
        timeout: Duration,
    ) -> Result<Arc<dyn DynTool>, InvalidSchema> {
        let mut schema = Value::Object(tool.input_schema.as_ref().clone());
        if let Value::Object(map) = &mut schema {
            // The model reads the description; the validator needs no meta-schema URL it might
            // not know.
            map.remove("$schema");
            if !map.contains_key("type") {
                map.insert("type".into(), Value::String("object".into()));
            }
        }
        let validator = jsonschema::validator_for(&schema).map_err(|source| InvalidSchema {
            tool: tool.name.to_string(),
            source: Box::new(source),
        })?;
        let annotations = tool.annotations.as_ref();
        let (kind, mutating) = kind_of(
            &tool.name,
            annotations.and_then(|a| a.read_only_hint),
            annotations.and_then(|a| a.destructive_hint),
        );
        let description = tool
            .description
            .as_deref()
            .map(str::to_owned)
            .or_else(|| tool.title.clone())
            .unwrap_or_else(|| format!("The `{}` tool of the MCP server `{server}`.", tool.name));
        let spec = ToolSpec {
            id: tool_id(server, &tool.name),
            description,
            parameters: schema,
            requires: crate::capability::RequirementSet::default(),
            kind,
            title: tool_id(server, &tool.name),
            mutating,
            subject: crate::tool::Subject::None,
            origin: Origin::Mcp(sanitize(server)),
            prompt_hint: None,
            unavailable: false,
            decided_as: None,
        };
        Ok(Arc::new(Self {
            spec,
            remote: tool.name.to_string(),
            server: server.to_owned(),
            peer,
            validator,
            timeout,
        }))
    }

    /// Calls the tool with arguments [`DynTool::parse`] validated.
    async fn call(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let Value::Object(arguments) = args else {
            return Err(ToolError::InvalidArguments {
                tool: self.spec.id.clone(),
                message: "arguments must be an object".into(),
            });
        };
        let params = CallToolRequestParams::new(self.remote.clone()).with_arguments(arguments);
        // Dropping the call (cancel, timeout) sends `notifications/cancelled` to the server.
        let call = self.peer.call_tool_once(params);
        let result = tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
            outcome = tokio::time::timeout(self.timeout, call) => match outcome {
                Err(_) => return Err(ToolError::Timeout(self.timeout)),
                Ok(Err(error)) => {
                    return Err(ToolError::External {
                        message: format!(
                            "the MCP server `{}` failed the call: {error}",
                            self.server
                        ),
                        source: Some(std::sync::Arc::new(error)),
                    });
                }
                Ok(Ok(CallToolResponse::Complete(result))) => result,
                Ok(Ok(_)) => {
                    return Err(ToolError::external(format!(
                        "the MCP server `{}` asked for input or started a task; Keel does not \
                         support either yet",
                        self.server
                    )));
                }
            },
        };
        let value = serde_json::to_value(&result).unwrap_or(Value::Null);
        let text = render_content(&value);
        if value.get("isError").and_then(Value::as_bool) == Some(true) {
            return Err(ToolError::external(if text.is_empty() {
                format!("the `{}` tool reported an error", self.remote)
            } else {
                text
            }));
        }
        let (text, output_path) = ctx.cap_bytes(&self.spec.id, text, OUTPUT_BYTES).await?;
        let mut output = ToolOutput::text(text);
        output.output_path = output_path;
        Ok(output)
    }
}

/// The text of a call's result: text blocks as they are, other blocks and structured content
/// as JSON.
pub fn render_content(result: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(blocks) = result.get("content").and_then(Value::as_array) {
        for block in blocks {
            match block.get("text").and_then(Value::as_str) {
                Some(text) if block.get("type").and_then(Value::as_str) == Some("text") => {
                    parts.push(text.to_owned());
                }
                _ => parts.push(block.to_string()),
            }
        }
    }
    if parts.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        parts.push(structured.to_string());
    }
    parts.join("\n")
}

impl JsonTool for McpTool {
    fn json_spec(&self) -> (&ToolSpec, &jsonschema::Validator) {
        (&self.spec, &self.validator)
    }

    fn run_json<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(self.call(args, ctx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_flat_and_valid() {
        assert_eq!(
            tool_id("git hub", "create.issue"),
            "mcp__git_hub__create_issue"
        );
        assert_eq!(tool_id("s", &"x".repeat(100)).len(), 64);
        assert_eq!(
            kind_of("search_docs", Some(true), None),
            (ToolKind::Search, false)
        );
        assert_eq!(kind_of("get", Some(true), None), (ToolKind::Read, false));
        assert_eq!(
            kind_of("delete_row", None, Some(true)),
            (ToolKind::Delete, true)
        );
        assert_eq!(
            kind_of("update", Some(false), Some(true)),
            (ToolKind::Edit, true)
        );
        assert_eq!(kind_of("echo", None, None), (ToolKind::Other, true));
    }
}
