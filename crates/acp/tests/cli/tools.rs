//! `keel tools`, `keel tool call` and `keel permissions check`.

use super::common::{Sandbox, run};

#[test]
fn tools_lists_the_bundled_set_as_a_table_and_as_json() {
    let sandbox = Sandbox::new();
    sandbox.write(
        &sandbox.project_file(),
        "[tools.web_fetch]\nenabled = false\n",
    );
    let out = run(sandbox.keel(&["tools", "--json"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let tools: Vec<serde_json::Value> = serde_json::from_str(&out.stdout).unwrap();
    let ids: Vec<&str> = tools.iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(&ids[..6], ["read", "write", "edit", "glob", "grep", "bash"]);
    let read = &tools[0];
    assert_eq!(read["kind"], "read");
    assert_eq!(read["mutating"], false);
    assert_eq!(read["origin"]["layer"], "bundled");
    assert!(
        read["parameters"]["properties"]["file_path"].is_object(),
        "{read}"
    );
    let web_fetch = tools.iter().find(|t| t["id"] == "web_fetch").unwrap();
    assert_eq!(web_fetch["enabled"], false);

    let out = run(sandbox.keel(&["tools"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(lines[0].starts_with("ID"), "{}", out.stdout);
    let bash = lines.iter().find(|l| l.starts_with("bash ")).unwrap();
    let columns: Vec<&str> = bash.split_whitespace().collect();
    assert_eq!(&columns[..5], ["bash", "execute", "yes", "yes", "bundled"]);
    // Aligned: every row's KIND value starts where the header's does.
    let kind_at = lines[0].find("KIND").unwrap();
    for line in lines[1..].iter().take_while(|line| !line.is_empty()) {
        assert_eq!(&line[kind_at - 2..kind_at], "  ", "{line}");
        assert!(line.as_bytes()[kind_at].is_ascii_lowercase(), "{line}");
    }
}

#[test]
fn tool_call_read_returns_an_output_envelope() {
    let sandbox = Sandbox::new();
    sandbox.write(&sandbox.workspace.join("notes.txt"), "first\nsecond\n");
    let workspace = sandbox.workspace.to_str().unwrap();
    let out = run(sandbox.keel(&[
        "tool",
        "call",
        "read",
        r#"{"file_path":"notes.txt"}"#,
        "--workspace",
        workspace,
    ]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let envelope: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(envelope["type"], "output", "{envelope}");
    let text = envelope["data"]["output"].as_str().unwrap();
    assert!(text.contains("first") && text.contains("second"), "{text}");
    assert!(envelope["metadata"]["duration_ms"].is_u64());
}

#[test]
fn tool_call_outside_the_workspace_is_an_error_envelope_and_exit_1() {
    let sandbox = Sandbox::new();
    let secret = sandbox.home.join("secret.txt");
    sandbox.write(&secret, "token");
    let workspace = sandbox.workspace.to_str().unwrap();
    let args = serde_json::json!({ "file_path": secret }).to_string();
    let out = run(sandbox.keel(&["tool", "call", "read", &args, "--workspace", workspace]));
    assert_eq!(out.code, 1, "{}", out.stderr);
    let envelope: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(envelope["type"], "error");
    let error = envelope["error_text"].as_str().unwrap();
    assert!(error.contains("outside"), "{error}");
    assert!(!out.stdout.contains("token"));

    let out = run(sandbox.keel(&["tool", "call", "read", r#"{"file_path": 3}"#]));
    assert_eq!(out.code, 1, "{}", out.stderr);
    let envelope: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(
        envelope["error_text"]
            .as_str()
            .unwrap()
            .contains("invalid arguments"),
        "{envelope}"
    );
}

/// `keel tool call grep` decides the files its walk finds one by one, as reads, exactly as a
/// turn does: a glob or type filter that re-includes a `.env` names it, never shows its lines.
#[test]
fn tool_call_search_never_shows_a_file_a_read_would_ask_for() {
    let sandbox = Sandbox::new();
    sandbox.write(&sandbox.workspace.join(".env"), "API_TOKEN=s3cr3t\n");
    sandbox.write(&sandbox.workspace.join(".env.local"), "API_TOKEN=s3cr3t\n");
    sandbox.write(&sandbox.workspace.join("notes.txt"), "API_TOKEN=none\n");
    let workspace = sandbox.workspace.to_str().unwrap();
    for args in [
        r#"{"pattern":"API_TOKEN","path":".","glob":".env","output_mode":"content"}"#,
        r#"{"pattern":"API_TOKEN","path":".","glob":".env*","output_mode":"content"}"#,
        r#"{"pattern":"API_TOKEN","path":".","glob":"{.env,notes.txt}","output_mode":"content"}"#,
    ] {
        let out = run(sandbox.keel(&["tool", "call", "grep", args, "--workspace", workspace]));
        assert!(!out.stdout.contains("s3cr3t"), "{args}: {}", out.stdout);
        assert!(
            out.stdout.contains("not searched"),
            "{args}: {}",
            out.stdout
        );
    }
}

#[test]
fn tool_call_is_headless_asks_are_denied_unless_the_mode_allows() {
    let sandbox = Sandbox::new();
    let target = sandbox.workspace.join("new.txt");
    let args = r#"{"file_path":"new.txt","content":"hi\n"}"#;
    let out = run(sandbox.keel(&["tool", "call", "write", args]));
    assert_eq!(out.code, 1, "{}", out.stderr);
    let envelope: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        envelope["error_text"].as_str(),
        Some(keel_core::policy::HEADLESS_DENIAL)
    );
    assert!(!target.exists(), "a denied write wrote");

    let out = run(sandbox.keel(&["tool", "call", "write", args, "--mode", "yolo"]));
    assert_eq!(out.code, 0, "{} {}", out.stdout, out.stderr);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "hi\n");
}

#[test]
fn unknown_tool_and_bad_json_are_usage_errors() {
    let sandbox = Sandbox::new();
    let out = run(sandbox.keel(&["tool", "call", "reed", "{}"]));
    assert_eq!(out.code, 2);
    assert!(out.stdout.is_empty());
    assert!(out.stderr.contains("unknown tool `reed`"), "{}", out.stderr);
    assert!(out.stderr.contains("read, write, edit"), "{}", out.stderr);
    let out = run(sandbox.keel(&["tool", "call", "read", "{not json"]));
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("not valid JSON"), "{}", out.stderr);
}

#[test]
fn permissions_check_explains_the_decision() {
    let sandbox = Sandbox::new();
    let out = run(sandbox.keel(&[
        "permissions",
        "check",
        "--tool",
        "bash",
        "--args",
        r#"{"command":"cargo test"}"#,
    ]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.starts_with("action: ask\nwhy: "),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("approval keys: `cargo test`"),
        "{}",
        out.stdout
    );

    let out = run(sandbox.keel(&[
        "permissions",
        "check",
        "--tool",
        "bash",
        "--args",
        r#"{"command":"cargo test"}"#,
        "--headless",
    ]));
    assert!(out.stdout.starts_with("action: deny\n"), "{}", out.stdout);
    assert!(
        out.stdout.contains(keel_core::policy::HEADLESS_DENIAL),
        "{}",
        out.stdout
    );

    let out = run(sandbox.keel(&[
        "permissions",
        "check",
        "--tool",
        "read",
        "--args",
        r#"{"file_path":"README.md"}"#,
        "--mode",
        "read-only",
    ]));
    assert!(out.stdout.starts_with("action: allow\n"), "{}", out.stdout);
}

#[test]
fn tools_says_why_web_search_is_not_offered() {
    let sandbox = Sandbox::new();
    let mut command = sandbox.keel(&["tools"]);
    command
        .env_remove("KEEL_SEARXNG_URL")
        .env_remove("BRAVE_API_KEY");
    let out = run(command);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains(
            "`web_search` is not offered to the model: no search service is set (set \
             KEEL_SEARXNG_URL to a SearXNG instance, or BRAVE_API_KEY)."
        ),
        "{}",
        out.stdout
    );
    let mut command = sandbox.keel(&["tools"]);
    command.env("KEEL_SEARXNG_URL", "https://searx.example.org");
    let out = run(command);
    assert!(!out.stdout.contains("is not offered"), "{}", out.stdout);
}
