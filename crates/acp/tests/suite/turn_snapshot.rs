//! The update stream of a whole turn (real engine, mock model), snapshotted with the session id,
//! paths, message ids and durations redacted: read, edit (approved, with its diff), bash
//! (approved, output streamed), answer.

use agent_client_protocol::v1::schema::StopReason;
use keel_testkit::acp_client::ClientOptions;

use super::support::EngineHarness;
use super::turns::{LIB, allow, read_edit_bash};

#[tokio::test]
async fn read_edit_bash_with_two_approvals_on_disk_and_local_shell() {
    let harness = EngineHarness::start(
        ClientOptions::default().permissions(allow(2)),
        &[("src/lib.rs", LIB)],
        read_edit_bash(),
    )
    .await;
    let answer = harness.prompt("fix the typo").await;
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    assert_eq!(
        std::fs::read_to_string(harness.root.join("src/lib.rs")).unwrap(),
        LIB.replace("helo", "hello")
    );
    assert!(harness.root.join("build").is_dir());
    assert_eq!(harness.mock.requests().len(), 4);
    let events = harness.events_json();
    insta::assert_json_snapshot!(events, @r#"
    [
      {
        "update": {
          "sessionUpdate": "available_commands_update",
          "availableCommands": [
            {
              "name": "tools",
              "description": "List the loaded tools and where each comes from"
            },
            {
              "name": "permissions",
              "description": "Show the effective permission rules by scope"
            },
            {
              "name": "mode",
              "description": "Show or switch the security mode (ask, allowlist, yolo, read-only)",
              "input": {
                "hint": "mode name"
              }
            },
            {
              "name": "model",
              "description": "Show or switch the model",
              "input": {
                "hint": "model id"
              }
            },
            {
              "name": "compact",
              "description": "Summarize the conversation so far to free the model's context window",
              "input": {
                "hint": "what to focus on"
              }
            },
            {
              "name": "mcp",
              "description": "Show each MCP server's state and tools"
            },
            {
              "name": "jobs",
              "description": "List the background commands (id, command, state, runtime)"
            },
            {
              "name": "help",
              "description": "Explain Keel's commands"
            },
            {
              "name": "clear",
              "description": "Start a new conversation in this session (the model forgets what was said)"
            },
            {
              "name": "init",
              "description": "Have the model write an AGENTS.md for this project (you approve the write)",
              "input": {
                "hint": "what to focus on"
              }
            }
          ]
        }
      },
      {
        "update": {
          "sessionUpdate": "agent_message_chunk",
          "content": {
            "type": "text",
            "text": "Let me l"
          },
          "messageId": "[message 1]"
        }
      },
      {
        "update": {
          "sessionUpdate": "agent_message_chunk",
          "content": {
            "type": "text",
            "text": "ook."
          },
          "messageId": "[message 1]"
        }
      },
      {
        "update": {
          "sessionUpdate": "usage_update",
          "used": 120,
          "size": 200000
        }
      },
      {
        "update": {
          "sessionUpdate": "tool_call",
          "toolCallId": "t1",
          "title": "Read src/lib.rs",
          "name": "read",
          "kind": "read",
          "locations": [
            {
              "path": "[root]/src/lib.rs"
            }
          ],
          "rawInput": {
            "file_path": "src/lib.rs"
          }
        }
      },
      {
        "update": {
          "sessionUpdate": "tool_call_update",
          "toolCallId": "t1",
          "status": "in_progress"
        }
      },
      {
        "update": {
          "sessionUpdate": "tool_call_update",
          "toolCallId": "t1",
          "status": "completed",
          "content": [
            {
              "type": "content",
              "content": {
                "type": "text",
                "text": "```\n     1\tpub fn greet() -> &'static str {\n     2\t    \"helo\"\n     3\t}\n```"
              }
            }
          ],
          "locations": [
            {
              "path": "[root]/src/lib.rs",
              "line": 1
            }
          ],
          "rawOutput": {
            "type": "output",
            "data": {
              "start_line": 1,
              "end_line": 3,
              "total_lines": 3,
              "output": "     1\tpub fn greet() -> &'static str {\n     2\t    \"helo\"\n     3\t}"
            },
            "metadata": {
              "duration_ms": 0
            }
          }
        }
      },
      {
        "update": {
          "sessionUpdate": "usage_update",
          "used": 120,
          "size": 200000
        }
      },
      {
        "update": {
          "sessionUpdate": "tool_call",
          "toolCallId": "t2",
          "title": "Edit src/lib.rs",
          "name": "edit",
          "kind": "edit",
          "locations": [
            {
              "path": "[root]/src/lib.rs"
            }
          ],
          "rawInput": {
            "file_path": "src/lib.rs",
            "old_string": "\"helo\"",
            "new_string": "\"hello\""
          }
        }
      },
      {
        "permission": {
          "toolCall": {
            "toolCallId": "t2",
            "kind": "edit",
            "status": "pending",
            "title": "Edit src/lib.rs",
            "name": "edit",
            "content": [
              {
                "type": "diff",
                "path": "[root]/src/lib.rs",
                "oldText": "pub fn greet() -> &'static str {\n    \"helo\"\n}\n",
                "newText": "pub fn greet() -> &'static str {\n    \"hello\"\n}\n"
              },
              {
                "type": "content",
                "content": {
                  "type": "text",
                  "text": "Keel will apply this change to `src/lib.rs`. Keel asks before this by default: file changes are reviewed.\n\nRule: the manifest rule `fs.write` * → ask (from the bundled defaults) matches `src/lib.rs` (file changes are reviewed)."
                }
              }
            ],
            "locations": [
              {
                "path": "[root]/src/lib.rs"
              }
            ],
            "rawInput": {
              "file_path": "src/lib.rs",
              "old_string": "\"helo\"",
              "new_string": "\"hello\""
            }
          },
          "options": [
            {
              "optionId": "allow-once",
              "name": "Allow once",
              "kind": "allow_once"
            },
            {
              "optionId": "allow-always",
              "name": "Always allow edits to `src/**` in this session",
              "kind": "allow_always"
            },
            {
              "optionId": "reject-once",
              "name": "Reject",
              "kind": "reject_once"
            },
            {
              "optionId": "reject-always",
              "name": "Always reject edits to `src/**` in this session",
              "kind": "reject_always"
            }
          ],
          "answer": "allow-once"
        }
      },
      {
        "update": {
          "sessionUpdate": "tool_call_update",
          "toolCallId": "t2",
          "status": "in_progress"
        }
      },
      {
        "update": {
          "sessionUpdate": "tool_call_update",
          "toolCallId": "t2",
          "status": "completed",
          "content": [
            {
              "type": "diff",
              "path": "[root]/src/lib.rs",
              "oldText": "pub fn greet() -> &'static str {\n    \"helo\"\n}\n",
              "newText": "pub fn greet() -> &'static str {\n    \"hello\"\n}\n"
            }
          ],
          "locations": [
            {
              "path": "[root]/src/lib.rs",
              "line": 2
            }
          ],
          "rawOutput": {
            "type": "output",
            "data": {
              "path": "src/lib.rs",
              "replacements": 1,
              "added": 1,
              "removed": 1,
              "line": 2,
              "output": "Edited src/lib.rs: replaced 1 occurrence (+1 −1 lines).\n\ndiff --git a/src/lib.rs b/src/lib.rs\n--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,3 +1,3 @@\n pub fn greet() -> &'static str {\n-    \"helo\"\n+    \"hello\"\n }\n"
            },
            "metadata": {
              "duration_ms": 0
            }
          }
        }
      },
      {
        "update": {
          "sessionUpdate": "usage_update",
          "used": 120,
          "size": 200000
        }
      },
      {
        "update": {
          "sessionUpdate": "tool_call",
          "toolCallId": "t3",
          "title": "mkdir -p build && echo built",
          "name": "bash",
          "kind": "execute",
          "rawInput": {
            "command": "mkdir -p build && echo built"
          }
        }
      },
      {
        "permission": {
          "toolCall": {
            "toolCallId": "t3",
            "kind": "execute",
            "status": "pending",
            "title": "mkdir -p build && echo built",
            "name": "bash",
            "content": [
              {
                "type": "content",
                "content": {
                  "type": "text",
                  "text": "```sh\nmkdir -p build && echo built\n```"
                }
              },
              {
                "type": "content",
                "content": {
                  "type": "text",
                  "text": "Keel will run this command in `[root]`. Keel asks before this by default: commands that may change things are reviewed.\n\nRule: the manifest rule `shell.run` * → ask (from the bundled defaults) matches `mkdir -p build` (commands that may change things are reviewed)."
                }
              }
            ],
            "rawInput": {
              "command": "mkdir -p build && echo built"
            }
          },
          "options": [
            {
              "optionId": "allow-once",
              "name": "Allow once",
              "kind": "allow_once"
            },
            {
              "optionId": "allow-always",
              "name": "Always allow commands starting with `mkdir` and `echo` in this session",
              "kind": "allow_always"
            },
            {
              "optionId": "reject-once",
              "name": "Reject",
              "kind": "reject_once"
            },
            {
              "optionId": "reject-always",
              "name": "Always reject commands starting with `mkdir` and `echo` in this session",
              "kind": "reject_always"
            }
          ],
          "answer": "allow-once"
        }
      },
      {
        "update": {
          "sessionUpdate": "tool_call_update",
          "toolCallId": "t3",
          "status": "in_progress"
        }
      },
      {
        "update": {
          "sessionUpdate": "tool_call_update",
          "toolCallId": "t3",
          "content": [
            {
              "type": "content",
              "content": {
                "type": "text",
                "text": "```console\nbuilt\n```"
              }
            }
          ]
        }
      },
      {
        "update": {
          "sessionUpdate": "tool_call_update",
          "toolCallId": "t3",
          "status": "completed",
          "content": [
            {
              "type": "content",
              "content": {
                "type": "text",
                "text": "```console\nbuilt\n```"
              }
            }
          ],
          "rawOutput": {
            "type": "output",
            "data": {
              "exit_code": 0,
              "sandbox": "namespaces",
              "output": "built\n"
            },
            "metadata": {
              "duration_ms": 0
            }
          }
        }
      },
      {
        "update": {
          "sessionUpdate": "agent_message_chunk",
          "content": {
            "type": "text",
            "text": "Fixed th"
          },
          "messageId": "[message 2]"
        }
      },
      {
        "update": {
          "sessionUpdate": "agent_message_chunk",
          "content": {
            "type": "text",
            "text": "e greeti"
          },
          "messageId": "[message 2]"
        }
      },
      {
        "update": {
          "sessionUpdate": "agent_message_chunk",
          "content": {
            "type": "text",
            "text": "ng."
          },
          "messageId": "[message 2]"
        }
      },
      {
        "update": {
          "sessionUpdate": "usage_update",
          "used": 120,
          "size": 200000
        }
      }
    ]
    "#);
}
