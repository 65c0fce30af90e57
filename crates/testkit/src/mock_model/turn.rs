//! [`Turn`]: a high-level model response, rendered as realistic Anthropic or OpenAI SSE events.

use serde_json::{Value, json};

/// One content block of a scripted turn.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// Visible text, streamed in chunks of [`Turn::chunk_chars`] characters.
    Text(String),
    /// Reasoning with its signature (the signature is Anthropic-only).
    Thinking {
        /// The reasoning text.
        text: String,
        /// The signature sent in a `signature_delta`.
        signature: String,
    },
    /// A tool call; its input JSON is streamed in [`Turn::argument_chunks`] fragments.
    ToolCall {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// Arguments.
        input: Value,
    },
}

/// A model response described once and rendered for either API.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// Content blocks, in order.
    pub blocks: Vec<Block>,
    /// Uncached prompt tokens (Anthropic `input_tokens`; OpenAI `prompt_tokens` adds the
    /// cached ones).
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Prompt tokens read from the cache.
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the cache (Anthropic only).
    pub cache_write_tokens: u64,
    /// The raw stop reason (`end_turn`, `length`, ...); `None` derives it from the blocks.
    pub stop: Option<String>,
    /// Characters per text/thinking delta (default 8).
    pub chunk_chars: usize,
    /// Fragments per tool-argument JSON (default 4).
    pub argument_chunks: usize,
    /// The model named in the events.
    pub model: String,
}

impl Default for Turn {
    fn default() -> Self {
        Self {
            blocks: Vec::new(),
            input_tokens: 100,
            output_tokens: 20,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            stop: None,
            chunk_chars: 8,
            argument_chunks: 4,
            model: "mock-model".to_owned(),
        }
    }
}

impl Turn {
    /// An empty turn (usage 100 in / 20 out).
    pub fn new() -> Self {
        Self::default()
    }

    /// A turn with one text block.
    pub fn text_only(text: impl Into<String>) -> Self {
        Self::new().text(text)
    }

    /// Adds a text block.
    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.blocks.push(Block::Text(text.into()));
        self
    }

    /// Adds a thinking block.
    pub fn thinking(mut self, text: impl Into<String>, signature: impl Into<String>) -> Self {
        self.blocks.push(Block::Thinking {
            text: text.into(),
            signature: signature.into(),
        });
        self
    }

    /// Adds a tool call.
    pub fn tool_call(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        input: Value,
    ) -> Self {
        self.blocks.push(Block::ToolCall {
            id: id.into(),
            name: name.into(),
            input,
        });
        self
    }

    /// Sets the token counts.
    pub fn usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.input_tokens = input_tokens;
        self.output_tokens = output_tokens;
        self
    }

    /// Sets the cache counts.
    pub fn cache(mut self, read: u64, write: u64) -> Self {
        self.cache_read_tokens = read;
        self.cache_write_tokens = write;
        self
    }

    /// Sets the raw stop reason, in the target API's vocabulary.
    pub fn stop(mut self, reason: impl Into<String>) -> Self {
        self.stop = Some(reason.into());
        self
    }

    /// Sets the characters per text delta.
    pub fn chunk_chars(mut self, chars: usize) -> Self {
        self.chunk_chars = chars.max(1);
        self
    }

    fn has_tool_calls(&self) -> bool {
        self.blocks
            .iter()
            .any(|block| matches!(block, Block::ToolCall { .. }))
    }

    /// The Anthropic Messages stream, one string per SSE event.
    pub fn anthropic_events(&self) -> Vec<String> {
        let mut events = vec![anthropic_event(
            "message_start",
            json!({"type": "message_start", "message": {
                "id": "msg_mock",
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": {
                    "input_tokens": self.input_tokens,
                    "cache_creation_input_tokens": self.cache_write_tokens,
                    "cache_read_input_tokens": self.cache_read_tokens,
                    "output_tokens": 1,
                },
            }}),
        )];
        events.push(anthropic_event("ping", json!({"type": "ping"})));
        for (index, block) in self.blocks.iter().enumerate() {
            let start = |content_block: Value| {
                anthropic_event(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": index, "content_block": content_block}),
                )
            };
            let delta = |delta: Value| {
                anthropic_event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index, "delta": delta}),
                )
            };
            match block {
                Block::Text(text) => {
                    events.push(start(json!({"type": "text", "text": ""})));
                    for chunk in split_chars(text, self.chunk_chars) {
                        events.push(delta(json!({"type": "text_delta", "text": chunk})));
                    }
                }
                Block::Thinking { text, signature } => {
                    events.push(start(
                        json!({"type": "thinking", "thinking": "", "signature": ""}),
                    ));
                    for chunk in split_chars(text, self.chunk_chars) {
                        events.push(delta(json!({"type": "thinking_delta", "thinking": chunk})));
                    }
                    events.push(delta(
                        json!({"type": "signature_delta", "signature": signature}),
                    ));
                }
                Block::ToolCall { id, name, input } => {
                    events.push(start(
                        json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                    ));
                    events.push(delta(
                        json!({"type": "input_json_delta", "partial_json": ""}),
                    ));
                    for chunk in split_parts(&input.to_string(), self.argument_chunks) {
                        events.push(delta(
                            json!({"type": "input_json_delta", "partial_json": chunk}),
                        ));
                    }
                }
            }
            events.push(anthropic_event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
        }
        let stop = self.stop.clone().unwrap_or_else(|| {
            if self.has_tool_calls() {
                "tool_use"
            } else {
                "end_turn"
            }
            .to_owned()
        });
        events.push(anthropic_event(
            "message_delta",
            json!({
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": null},
                "usage": {"output_tokens": self.output_tokens},
            }),
        ));
        events.push(anthropic_event(
            "message_stop",
            json!({"type": "message_stop"}),
        ));
        events
    }

    /// The OpenAI Chat Completions stream, one string per SSE event, ending with `[DONE]`.
    pub fn openai_events(&self) -> Vec<String> {
        let chunk = |delta: Value, finish: Value| {
            openai_event(&json!({
                "id": "chatcmpl-mock",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": self.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }))
        };
        let mut events = vec![chunk(
            json!({"role": "assistant", "content": ""}),
            Value::Null,
        )];
        let mut tool_index = 0;
        for block in &self.blocks {
            match block {
                Block::Text(text) => {
                    for piece in split_chars(text, self.chunk_chars) {
                        events.push(chunk(json!({"content": piece}), Value::Null));
                    }
                }
                Block::Thinking { text, .. } => {
                    for piece in split_chars(text, self.chunk_chars) {
                        events.push(chunk(json!({"reasoning_content": piece}), Value::Null));
                    }
                }
                Block::ToolCall { id, name, input } => {
                    events.push(chunk(
                        json!({"tool_calls": [{
                            "index": tool_index,
                            "id": id,
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }]}),
                        Value::Null,
                    ));
                    for piece in split_parts(&input.to_string(), self.argument_chunks) {
                        events.push(chunk(
                            json!({"tool_calls": [{"index": tool_index, "function": {"arguments": piece}}]}),
                            Value::Null,
                        ));
                    }
                    tool_index += 1;
                }
            }
        }
        let stop = self.stop.clone().unwrap_or_else(|| {
            if self.has_tool_calls() {
                "tool_calls"
            } else {
                "stop"
            }
            .to_owned()
        });
        events.push(chunk(json!({}), Value::String(stop)));
        let prompt = self.input_tokens + self.cache_read_tokens + self.cache_write_tokens;
        events.push(openai_event(&json!({
            "id": "chatcmpl-mock",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": self.model,
            "choices": [],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": self.output_tokens,
                "total_tokens": prompt + self.output_tokens,
                "prompt_tokens_details": {"cached_tokens": self.cache_read_tokens},
            },
        })));
        events.push(openai_done());
        events
    }
}

/// One Anthropic SSE event: `event: {name}` + `data: {json}`.
pub fn anthropic_event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// An Anthropic in-stream `error` event (`overloaded_error`, `api_error`, ...).
pub fn anthropic_error_event(kind: &str, message: &str) -> String {
    anthropic_event(
        "error",
        json!({"type": "error", "error": {"type": kind, "message": message}}),
    )
}

/// One OpenAI SSE event: `data: {json}`.
pub fn openai_event(data: &Value) -> String {
    format!("data: {data}\n\n")
}

/// The OpenAI terminator, `data: [DONE]`.
pub fn openai_done() -> String {
    "data: [DONE]\n\n".to_owned()
}

/// `text` in pieces of `size` characters (never splitting a character).
fn split_chars(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(size.max(1))
        .map(|piece| piece.iter().collect())
        .collect()
}

/// `text` in `parts` pieces of near-equal length (fewer when the text is shorter).
fn split_parts(text: &str, parts: usize) -> Vec<String> {
    let count = text.chars().count();
    let size = count.div_ceil(parts.max(1)).max(1);
    split_chars(text, size)
}
