//! `keel config show|schema|path` and configuration errors as the user sees them.

use super::common::{Sandbox, run};

#[test]
fn show_reports_each_layer_and_where_each_value_came_from() {
    let sandbox = Sandbox::new();
    sandbox.write(
        &sandbox.user_file(),
        "model = \"anthropic/claude-sonnet-4-5\"\nmode = \"yolo\"\nmax_tokens = 1000\n",
    );
    sandbox.write(
        &sandbox.project_file(),
        "mode = \"ask\"\n\n[tools.bash]\ntimeoutMs = 9000\n",
    );
    let mut command = sandbox.keel(&["config", "show", "--mode", "read-only"]);
    command.env("KEEL_MODEL", "openai/gpt-4.1");
    let out = run(command);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    let line = |prefix: &str| {
        lines
            .iter()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` line in\n{}", out.stdout))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        line("# user file"),
        "# user file: ~/.config/keel/config.toml"
    );
    assert_eq!(line("# project file"), "# project file: .keel/config.toml");
    assert_eq!(
        line("model ="),
        "model = \"openai/gpt-4.1\" # environment variable KEEL_MODEL"
    );
    assert_eq!(line("mode ="), "mode = \"read-only\" # flag --mode");
    assert_eq!(
        line("max_tokens ="),
        "max_tokens = 1000 # ~/.config/keel/config.toml:3:1"
    );
    assert_eq!(
        line("max_requests_per_turn ="),
        "max_requests_per_turn = 50 # default"
    );
    assert_eq!(
        line("timeoutMs ="),
        "timeoutMs = 9000 # .keel/config.toml:4:1"
    );

    let mut command = sandbox.keel(&["config", "show", "--json"]);
    command.env("KEEL_MODE", "yolo");
    let out = run(command);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(json["config"]["mode"], "yolo");
    assert_eq!(json["sources"]["mode"], "environment variable KEEL_MODE");
    assert_eq!(
        json["sources"]["max_tokens"],
        "~/.config/keel/config.toml:3:1"
    );
    assert_eq!(json["config"]["tools"]["bash"]["timeoutMs"], 9000);
}

#[test]
fn keel_config_points_at_another_user_file() {
    let sandbox = Sandbox::new();
    sandbox.write(&sandbox.user_file(), "mode = \"yolo\"\n");
    let other = sandbox.home.join("other.toml");
    sandbox.write(&other, "mode = \"read-only\"\n");
    let mut command = sandbox.keel(&["config", "show", "--json"]);
    command.env("KEEL_CONFIG", &other);
    let out = run(command);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(json["config"]["mode"], "read-only");
    assert_eq!(json["sources"]["mode"], "~/other.toml:1:1");

    let mut command = sandbox.keel(&["config", "show"]);
    command.env("KEEL_CONFIG", sandbox.home.join("missing.toml"));
    let out = run(command);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.starts_with("keel: cannot read ~/missing.toml"),
        "{}",
        out.stderr
    );
}

#[test]
fn errors_name_the_file_line_and_fix_and_exit_2() {
    let sandbox = Sandbox::new();
    sandbox.write(
        &sandbox.user_file(),
        "# settings\nmode = \"ask\"\nmodle = \"a/b\"\n",
    );
    let out = run(sandbox.keel(&["config", "show"]));
    assert_eq!(out.code, 2);
    assert!(out.stdout.is_empty());
    assert_eq!(
        out.stderr,
        "keel: unknown key `modle` in ~/.config/keel/config.toml:3:1; did you mean `model`?\n"
    );

    sandbox.write(&sandbox.user_file(), "");
    sandbox.write(
        &sandbox.project_file(),
        "model = \"a/b\"\nmode = \"sometimes\"\n",
    );
    let out = run(sandbox.keel(&["tools"]));
    assert_eq!(out.code, 2);
    assert_eq!(
        out.stderr,
        "keel: bad value for `mode` at .keel/config.toml:2:8: expected one of ask, allowlist, \
         yolo, read-only (found `sometimes`)\n"
    );

    sandbox.write(
        &sandbox.project_file(),
        "[[permission]]\npermission = \"edit\"\npattern = \"{workspce}/**\"\naction = \"deny\"\n",
    );
    let out = run(sandbox.keel(&["permissions", "list"]));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.starts_with(
            "keel: undefined path variable `{workspce}` in permission pattern `{workspce}/**` at \
             .keel/config.toml:3:11; did you mean `{workspace}`?"
        ),
        "{}",
        out.stderr
    );
}

#[test]
fn schema_is_a_valid_json_schema_that_accepts_the_example() {
    let out = run(Sandbox::new().keel(&["config", "schema"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let schema: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(jsonschema::meta::is_valid(&schema));
    let validator = jsonschema::validator_for(&schema).unwrap();
    let example = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/config/example.toml"),
    )
    .unwrap();
    let example: toml::Table = toml::from_str(&example).unwrap();
    assert!(validator.is_valid(&serde_json::to_value(example).unwrap()));
    assert!(!validator.is_valid(&serde_json::json!({"modle": "a/b"})));
    assert!(schema["properties"]["mode"].is_object());
}

#[test]
fn path_names_both_files() {
    let sandbox = Sandbox::new();
    sandbox.write(&sandbox.project_file(), "");
    let out = run(sandbox.keel(&["config", "path"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        format!(
            "user     {}  (not found)\nproject  {}\n",
            sandbox.user_file().display(),
            sandbox.project_file().display()
        )
    );
}

#[test]
fn permissions_list_shows_configured_rules_with_their_files() {
    let sandbox = Sandbox::new();
    sandbox.write(
        &sandbox.user_file(),
        "[[permission]]\npermission = \"bash\"\nprefix = \"cargo publish\"\naction = \"deny\"\n\
         reason = \"releases go through CI\"\n",
    );
    sandbox.write(
        &sandbox.project_file(),
        "mode = \"ask\"\n\n[[permission]]\npermission = \"fs.write\"\npattern = \"{workspace}/gen/**\"\naction = \"deny\"\n",
    );
    let out = run(sandbox.keel(&["permissions", "list"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with("mode: ask"), "{}", out.stdout);
    let user_rule = out
        .stdout
        .lines()
        .find(|l| l.contains("cargo publish"))
        .unwrap_or_else(|| panic!("no user rule in\n{}", out.stdout));
    assert!(user_rule.contains("deny"), "{user_rule}");
    assert!(
        user_rule.contains(&format!(
            "from {}: releases go through CI",
            sandbox.user_file().display()
        )),
        "{user_rule}"
    );
    let project_rule = out
        .stdout
        .lines()
        .find(|l| l.contains("/gen/**"))
        .unwrap_or_else(|| panic!("no project rule in\n{}", out.stdout));
    assert!(
        project_rule.contains(&sandbox.workspace.display().to_string()),
        "{{workspace}} is expanded: {project_rule}"
    );
    assert!(project_rule.contains(&sandbox.project_file().display().to_string()));
}

#[test]
fn show_reports_an_invalid_permission_rule_with_file_and_line_and_exits_2() {
    let sandbox = Sandbox::new();
    sandbox.write(
        &sandbox.user_file(),
        "[[permission]]\npermission = \"bash\"\npattern = \"cargo test\"\naction = \"allow\"\n\n\
         [[permission]]\npermission = \"read\"\npattern = \"src/[[\"\naction = \"allow\"\n",
    );
    let out = run(sandbox.keel(&["config", "show"]));
    assert_eq!(out.code, 2, "{}", out.stdout);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert!(
        out.stderr.contains(
            "invalid permission rule at ~/.config/keel/config.toml:6:1: invalid pattern `src/[[`"
        ) && out.stderr.contains("Fix: "),
        "{}",
        out.stderr
    );
}

#[test]
fn type_errors_are_said_in_words() {
    let sandbox = Sandbox::new();
    sandbox.write(&sandbox.user_file(), "max_tokens = \"ten\"\n");
    let out = run(sandbox.keel(&["config", "show"]));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains(
            "bad value for `max_tokens` at ~/.config/keel/config.toml:1:14: expected a whole \
             number (0 or more), found string \"ten\""
        ),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("u32"), "{}", out.stderr);
}
