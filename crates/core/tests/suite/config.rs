//! Configuration: layering, provenance, and errors that name the file, the line and a fix.

use std::path::{Path, PathBuf};

use keel_core::config::{
    self, ConfigError, LoadOptions, Mode, ModelRef, Override, ProviderKind, RuleAction, Source,
};

// The project is trusted throughout (`dirs.options(true)`): layering is the subject here; the
// trust boundary has its own suite.
use super::config_support::Dirs;

fn file_line(source: &Source) -> (PathBuf, usize, usize) {
    match source {
        Source::File(at) => (at.path.clone(), at.line, at.column),
        other => panic!("expected a file source, got {other}"),
    }
}

fn load_err(options: &LoadOptions) -> ConfigError {
    config::load(options).expect_err("the configuration should be rejected")
}

#[test]
fn no_files_gives_the_defaults() {
    let dirs = Dirs::new();
    let effective = config::load(&dirs.options(true)).unwrap();
    assert_eq!(effective.config, config::Config::default());
    assert_eq!(effective.sources.get("mode"), &Source::Default);
    assert!(effective.files.iter().all(|f| !f.found));
}

#[test]
fn unknown_key_names_file_line_and_suggests_the_key() {
    let dirs = Dirs::new();
    dirs.write_user("# my settings\nmode = \"ask\"\nmodle = \"anthropic/claude\"\n");
    let err = load_err(&dirs.options(true));
    assert_eq!(
        err.to_string(),
        "unknown key `modle` in ~/.config/keel/config.toml:3:1; did you mean `model`?"
    );
    let (path, line, column) = file_line(err.location().unwrap());
    assert_eq!((path, line, column), (dirs.user_file(), 3, 1));
}

#[test]
fn unknown_nested_key_gets_its_dotted_path_and_a_case_insensitive_suggestion() {
    let dirs = Dirs::new();
    dirs.write_project("[tools.bash]\nenabled = true\ntimeoutms = 5000\n");
    let err = load_err(&dirs.options(true));
    assert_eq!(
        err.to_string(),
        "unknown key `tools.bash.timeoutms` in .keel/config.toml:3:1; did you mean `timeoutMs`?"
    );
}

#[test]
fn unknown_key_far_from_every_key_lists_the_allowed_ones() {
    let dirs = Dirs::new();
    dirs.write_project("[limits]\nzzz = 1\n");
    let err = load_err(&dirs.options(true));
    let text = err.to_string();
    assert!(
        text.starts_with(
            "unknown key `limits.zzz` in .keel/config.toml:2:1; expected one of `readBytes`"
        ),
        "{text}"
    );
}

#[test]
fn bad_mode_names_file_line_column_and_the_allowed_values() {
    let dirs = Dirs::new();
    dirs.write_project("model = \"openai/gpt-4.1\"\nmode = \"sometimes\"\n");
    let err = load_err(&dirs.options(true));
    assert_eq!(
        err.to_string(),
        "bad value for `mode` at .keel/config.toml:2:8: expected one of ask, allowlist, yolo, \
         read-only (found `sometimes`)"
    );
    let (path, line, _) = file_line(err.location().unwrap());
    assert_eq!((path, line), (dirs.project_file(), 2));
}

#[test]
fn bad_value_types_and_formats_are_explained() {
    let dirs = Dirs::new();
    dirs.write_user("[tools.read]\nenabled = \"yes\"\n");
    assert_eq!(
        load_err(&dirs.options(true)).to_string(),
        "bad value for `tools.read.enabled` at ~/.config/keel/config.toml:2:11: expected a \
         boolean, found string \"yes\""
    );
    dirs.write_user("model = \"claude\"\n");
    assert_eq!(
        load_err(&dirs.options(true)).to_string(),
        "bad value for `model` at ~/.config/keel/config.toml:1:9: expected `provider/model` (for \
         example `anthropic/claude-sonnet-4-5`), found `claude`"
    );
    dirs.write_user("[providers.anthropic]\nkind = \"gemini\"\n");
    assert_eq!(
        load_err(&dirs.options(true)).to_string(),
        "bad value for `providers.anthropic.kind` at ~/.config/keel/config.toml:2:8: expected \
         one of anthropic, openai (found `gemini`)"
    );
    dirs.write_user("max_tokens = 0\n");
    assert_eq!(
        load_err(&dirs.options(true)).to_string(),
        "bad value for `max_tokens` at ~/.config/keel/config.toml:1:1: expected a number of at \
         least 1, found 0"
    );
}

#[test]
fn rule_errors_point_into_the_rule() {
    let dirs = Dirs::new();
    dirs.write_project(
        "[[permission]]\npermission = \"bash\"\npattern = \"ls\"\naction = \"allow\"\n\n\
         [[permission]]\npermission = \"bash\"\naction = \"maybe\"\n",
    );
    assert_eq!(
        load_err(&dirs.options(true)).to_string(),
        "bad value for `permission[1].action` at .keel/config.toml:8:10: expected one of allow, \
         deny, ask (found `maybe`)"
    );
    dirs.write_project(
        "[[permission]]\npermission = \"bash\"\npatern = \"ls\"\naction = \"allow\"\n",
    );
    assert_eq!(
        load_err(&dirs.options(true)).to_string(),
        "unknown key `permission[0].patern` in .keel/config.toml:3:1; did you mean `pattern`?"
    );
    dirs.write_project("[[permission]]\nprefix = \"ls\"\n");
    assert_eq!(
        load_err(&dirs.options(true)).to_string(),
        "missing key `permission` in `permission[0]` at .keel/config.toml:1:1"
    );
}

#[test]
fn undefined_path_variable_in_a_rule_names_file_line_and_the_known_variables() {
    let dirs = Dirs::new();
    dirs.write_project(
        "[[permission]]\npermission = \"edit\"\npattern = \"{workspce}/src/**\"\naction = \"allow\"\n",
    );
    let err = load_err(&dirs.options(true));
    assert_eq!(
        err.to_string(),
        "undefined path variable `{workspce}` in permission pattern `{workspce}/src/**` at \
         .keel/config.toml:3:11; did you mean `{workspace}`? Known variables: {workspace}, \
         {session}"
    );
    assert!(matches!(err, ConfigError::UnknownVariable { .. }));

    dirs.write_project("\n[[permission]]\npermission = \"fs.write\"\nprefix = \"{ad-hoc}/x\"\n");
    let err = load_err(&dirs.options(true));
    assert!(
        err.to_string().starts_with(
            "undefined path variable `{ad-hoc}` in permission pattern `{ad-hoc}/x` at \
             .keel/config.toml:4:10"
        ),
        "{err}"
    );
    dirs.write_project("[[permission]]\npermission = \"read\"\npattern = \"src/{workspace}\"\n");
    assert_eq!(
        load_err(&dirs.options(true)).to_string(),
        "bad value for `permission[0].pattern` at .keel/config.toml:3:11: `{workspace}` may only \
         begin a pattern, found `src/{workspace}`"
    );
}

#[test]
fn braces_that_are_not_variables_are_left_alone() {
    let dirs = Dirs::new();
    dirs.write_project(
        "[[permission]]\npermission = \"bash\"\npattern = \"awk '{print $1}' *\"\naction = \"ask\"\n\
         [[permission]]\npermission = \"read\"\npattern = \"{workspace}/**/*.{rs,toml}\"\naction = \"allow\"\n",
    );
    let effective = config::load(&dirs.options(true)).unwrap();
    assert_eq!(effective.config.permissions.len(), 2);
}

#[test]
fn syntax_errors_name_the_line() {
    let dirs = Dirs::new();
    dirs.write_user("mode = \"ask\"\nmax_tokens = \n");
    let err = load_err(&dirs.options(true));
    assert!(matches!(err, ConfigError::Syntax { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.starts_with("syntax error at ~/.config/keel/config.toml:2:"),
        "{text}"
    );
}

#[test]
fn layers_override_in_order_and_provenance_says_where_each_value_came_from() {
    let dirs = Dirs::new();
    dirs.write_user(
        "model = \"anthropic/claude-sonnet-4-5\"\nmode = \"yolo\"\nmax_tokens = 1000\n\n\
         [tools.bash]\ntimeoutMs = 1000\n\n[limits]\nreadBytes = 10\n",
    );
    dirs.write_project("mode = \"allowlist\"\n\n[tools.bash]\nenabled = false\n");
    let mut options = dirs.options(true);
    options.overrides = config::env_overrides(|name| match name {
        "KEEL_MODEL" => Some("openai/gpt-4.1".into()),
        _ => None,
    });
    let options = options.flag("mode", "read-only", "--mode");
    let effective = config::load(&options).unwrap();
    let c = &effective.config;
    assert_eq!(c.model, Some("openai/gpt-4.1".parse::<ModelRef>().unwrap()));
    assert_eq!(c.mode, Mode::ReadOnly);
    assert_eq!(c.max_tokens, 1000);
    assert_eq!(
        c.max_requests_per_turn,
        config::DEFAULT_MAX_REQUESTS_PER_TURN
    );
    let bash = c.tool("bash");
    assert!(!bash.enabled);
    assert_eq!(bash.timeout_ms, Some(1000));
    assert!(c.tool("read").enabled);
    assert_eq!(c.limits.read_bytes, 10);
    assert_eq!(
        c.limits.glob_entries,
        config::Limits::default().glob_entries
    );

    let sources = &effective.sources;
    assert_eq!(sources.get("model"), &Source::Env("KEEL_MODEL".into()));
    assert_eq!(sources.get("mode"), &Source::Flag("--mode".into()));
    assert_eq!(
        file_line(sources.get("max_tokens")),
        (dirs.user_file(), 3, 1)
    );
    assert_eq!(
        file_line(sources.get("tools.bash.timeoutMs")),
        (dirs.user_file(), 6, 1)
    );
    assert_eq!(
        file_line(sources.get("tools.bash.enabled")),
        (dirs.project_file(), 4, 1)
    );
    assert_eq!(
        file_line(sources.get("limits.readBytes")),
        (dirs.user_file(), 9, 1)
    );
    assert_eq!(sources.get("limits.globEntries"), &Source::Default);
    assert_eq!(sources.get("max_requests_per_turn"), &Source::Default);
}

#[test]
fn rules_of_both_files_are_kept_user_first_with_their_sources() {
    let dirs = Dirs::new();
    dirs.write_user(
        "[[permission]]\npermission = \"bash\"\npattern = \"ls*\"\naction = \"allow\"\n",
    );
    dirs.write_project(
        "mode = \"ask\"\n\n[[permission]]\npermission = \"edit\"\npattern = \"{workspace}/Cargo.lock\"\naction = \"deny\"\n\n\
         [[permission]]\npermission = \"webfetch\"\naction = \"ask\"\n",
    );
    let effective = config::load(&dirs.options(true)).unwrap();
    let rules = &effective.config.permissions;
    assert_eq!(rules.len(), 3);
    assert_eq!(
        (
            rules[0].permission.as_str(),
            rules[0].pattern.as_deref(),
            rules[0].action()
        ),
        ("bash", Some("ls*"), RuleAction::Allow)
    );
    assert_eq!(rules[1].action(), RuleAction::Deny);
    assert_eq!(rules[2].subject(), "*", "no pattern: every subject");
    assert_eq!(
        file_line(rules[0].source.as_ref().unwrap()),
        (dirs.user_file(), 1, 1)
    );
    assert_eq!(
        file_line(rules[1].source.as_ref().unwrap()),
        (dirs.project_file(), 3, 1)
    );
    assert_eq!(
        file_line(rules[2].source.as_ref().unwrap()),
        (dirs.project_file(), 8, 1)
    );
}

#[test]
fn providers_merge_key_by_key_and_need_a_kind_unless_built_in() {
    let dirs = Dirs::new();
    // The user moves anthropic (a project may not: its key would follow, see below).
    dirs.write_user(
        "[providers.local]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmodels = [\"a\"]\n\n[providers.anthropic]\nbase_url = \"http://127.0.0.1:2\"\n",
    );
    dirs.write_project("[providers.local]\nmodels = [\"b\", \"c\"]\n");
    let effective = config::load(&dirs.options(true)).unwrap();
    let local = &effective.config.providers["local"];
    assert_eq!(local.kind, Some(ProviderKind::OpenAi));
    assert_eq!(local.base_url.as_deref(), Some("http://127.0.0.1:1/v1"));
    assert_eq!(local.models, ["b", "c"]);
    let env = |name: &str| (name == "ANTHROPIC_API_KEY").then(|| "sk-test".to_owned());
    let resolved = effective.config.provider_configs(&env);
    let anthropic = resolved.iter().find(|p| p.name == "anthropic").unwrap();
    assert_eq!(anthropic.kind, keel_core::provider::ProviderKind::Anthropic);
    assert_eq!(anthropic.base_url.as_deref(), Some("http://127.0.0.1:2"));
    assert!(anthropic.has_credentials());
    let local = resolved.iter().find(|p| p.name == "local").unwrap();
    assert_eq!(local.default_model.as_deref(), Some("b"));
    assert!(
        !local.api_key_required,
        "a custom endpoint without api_key_env needs no key"
    );

    dirs.write_user("");
    dirs.write_project("[providers.anthropic]\nbase_url = \"http://127.0.0.1:2\"\n");
    let refused = load_err(&dirs.options(true)).to_string();
    for part in [
        "ANTHROPIC_API_KEY",
        "http://127.0.0.1:2",
        "https://api.anthropic.com",
        ".keel/config.toml:2:1",
    ] {
        assert!(refused.contains(part), "{part}: {refused}");
    }

    dirs.write_project("\n[providers.local]\nbase_url = \"http://127.0.0.1:1/v1\"\n");
    assert_eq!(
        load_err(&dirs.options(true)).to_string(),
        "missing key `kind` in `providers.local` at .keel/config.toml:3:1"
    );
}

#[test]
fn bad_environment_and_flag_values_name_their_origin() {
    let dirs = Dirs::new();
    let mut options = dirs.options(true);
    options.overrides =
        config::env_overrides(|name| (name == "KEEL_MODE").then(|| "always".into()));
    assert_eq!(
        load_err(&options).to_string(),
        "bad value for `mode` in environment variable KEEL_MODE: expected one of ask, allowlist, \
         yolo, read-only (found `always`)"
    );
    let options = dirs.options(true).flag("model", "gpt", "--model");
    assert_eq!(
        load_err(&options).to_string(),
        "bad value for `model` in flag --model: expected `provider/model` (for example \
         `anthropic/claude-sonnet-4-5`), found `gpt`"
    );
}

#[test]
fn an_explicit_user_file_must_exist_the_default_one_need_not() {
    let dirs = Dirs::new();
    let mut options = dirs.options(true);
    options.user_file = Some(dirs.home.join("elsewhere.toml"));
    assert!(config::load(&options).is_ok());
    options.user_file_required = true;
    let err = load_err(&options);
    assert!(matches!(err, ConfigError::Read { .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with("cannot read ~/elsewhere.toml: "),
        "{err}"
    );
}

#[test]
fn show_annotates_every_value_with_its_source() {
    let dirs = Dirs::new();
    dirs.write_user("mode = \"yolo\"\n\n[tools.bash]\ntimeoutMs = 1000\n");
    dirs.write_project(
        "[[permission]]\npermission = \"bash\"\npattern = \"ls*\"\naction = \"allow\"\n",
    );
    let options = dirs
        .options(true)
        .flag("model", "openai/gpt-4.1", "--model");
    let effective = config::load(&options).unwrap();
    let shown = config::render_annotated(&effective);
    insta::assert_snapshot!(shown, @r#"
    # user file: ~/.config/keel/config.toml
    # project file: .keel/config.toml
    model = "openai/gpt-4.1"    # flag --model
    mode = "yolo"               # ~/.config/keel/config.toml:1:1
    max_requests_per_turn = 50  # default
    max_tokens = 8192           # default
    thinking = "off"            # default

    [limits]
    backgroundBytes = 65536  # default
    backgroundJobs = 8       # default
    bashBytes = 204800       # default
    globEntries = 1000       # default
    grepMatches = 200        # default
    readBytes = 204800       # default
    webFetchBytes = 204800   # default

    [tools.bash]
    enabled = true    # default
    timeoutMs = 1000  # ~/.config/keel/config.toml:4:1

    [[permission]]  # .keel/config.toml:1:1
    action = "allow"
    pattern = "ls*"
    permission = "bash"
    "#);
    // The rendering is itself a valid configuration with the same values.
    let reparsed: config::Config = toml::from_str(&shown).unwrap();
    let mut expected = effective.config.clone();
    expected
        .permissions
        .iter_mut()
        .for_each(|r| r.source = None);
    assert_eq!(reparsed, expected);
}

#[test]
fn the_schema_is_valid_and_matches_the_loader() {
    let schema = config::json_schema();
    assert!(jsonschema::meta::is_valid(&schema));
    let validator = jsonschema::validator_for(&schema).unwrap();
    let example = fixture("config/example.toml");
    let example: toml::Table = toml::from_str(&example).unwrap();
    let example = serde_json::to_value(&example).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&example)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    for bad in [
        serde_json::json!({"modle": "a/b"}),
        serde_json::json!({"mode": "sometimes"}),
        serde_json::json!({"model": "no-slash"}),
        serde_json::json!({"tools": {"bash": {"timeoutms": 1}}}),
        serde_json::json!({"permission": [{"action": "allow"}]}),
        serde_json::json!({"permission": [{"permission": "bash", "action": "maybe"}]}),
    ] {
        assert!(!validator.is_valid(&bad), "schema accepted {bad}");
    }
}

#[test]
fn the_documented_example_loads() {
    let dirs = Dirs::new();
    dirs.write_project(&fixture("config/example.toml"));
    let effective = config::load(&dirs.options(true)).unwrap();
    assert_eq!(effective.config.permissions.len(), 3);
    assert!(!effective.config.tool("web_fetch").enabled);
    // The engine accepts the rules (patterns compile, examples match).
    let policy = config::build_policy(
        &effective,
        &dirs.workspace,
        false,
        keel_core::policy::Trust::Trusted,
    )
    .unwrap();
    assert_eq!(policy.mode(), keel_core::policy::Mode::Allowlist);
    let flagged = dirs.options(true).flag("mode", "yolo", "--mode");
    assert_eq!(
        flagged.overrides,
        [Override::flag("mode", "yolo", "--mode")]
    );
}

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(name);
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn scripted_models_replay_the_script_named_by_keel_script() {
    let config = config::Config {
        model: Some("scripted/demo".parse().unwrap()),
        ..config::Config::default()
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/scripted/hello.json");
    let script = script.to_str().unwrap().to_owned();
    let env = |name: &str| (name == config::ENV_SCRIPT).then(|| script.clone());
    let (provider, model) = config::resolve_provider(&config, &env, None).unwrap();
    assert_eq!((provider.id(), model.as_str()), ("scripted", "demo"));
    let err = config::resolve_provider(&config, &|_| None, None).unwrap_err();
    assert!(err.to_string().contains("KEEL_SCRIPT"), "{err}");

    let none = config::Config::default();
    let err = config::resolve_provider(&none, &|_| None, None).unwrap_err();
    assert!(err.to_string().contains("ANTHROPIC_API_KEY"), "{err}");
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[expect(dead_code, reason = "only the schema is used")]
struct PathParams {
    file_path: String,
}

#[test]
fn configured_rules_reach_the_permission_engine_with_their_files() {
    use keel_core::capability::RequirementSet;
    use keel_core::policy::{Action, Call, Trust, render_rules};
    use keel_core::runtime::{Runtime, RuntimeConfig};
    use keel_core::tool::{Subject, ToolKind, ToolSpec};

    let dirs = Dirs::new();
    dirs.write_user(
        "mode = \"allowlist\"\n\n[[permission]]\npermission = \"fs.write\"\n\
         pattern = \"{workspace}/generated/**\"\naction = \"deny\"\nreason = \"generated code\"\n",
    );
    dirs.write_project(
        "[[permission]]\npermission = \"write\"\nprefix = \"{workspace}/notes\"\naction = \"allow\"\n",
    );
    let effective = config::load(&dirs.options(true)).unwrap();
    let policy = config::build_policy(&effective, &dirs.workspace, true, Trust::Trusted).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let runtime = Runtime::new(RuntimeConfig {
        roots: vec![dirs.workspace.clone()],
        requirements: RequirementSet::fs_read_write(&["{workspace}/**"], &["{workspace}/**"]),
        scratch_dir: scratch.path().join("s"),
        ..RuntimeConfig::default()
    })
    .unwrap();
    let spec = ToolSpec::new::<PathParams>("write", "Writes a file.")
        .kind(ToolKind::Edit)
        .subject(Subject::Path(Some("file_path".into())));
    let decide = |path: &str| {
        let args = serde_json::json!({ "file_path": path });
        policy.decide(&Call {
            spec: &spec,
            target: &super::policy_support::target(&spec, &args),
            runtime: &runtime,
        })
    };

    let denied = decide("generated/api.rs");
    assert_eq!(denied.action, Action::Deny);
    let why = denied.explanation.to_string();
    assert!(why.contains(dirs.user_file().to_str().unwrap()), "{why}");
    assert!(why.contains("generated code"), "{why}");

    let allowed = decide("notes/today.md");
    assert_eq!(allowed.action, Action::Allow, "{}", allowed.explanation);
    assert!(
        allowed
            .explanation
            .to_string()
            .contains(dirs.project_file().to_str().unwrap())
    );

    // Headless: what would be asked is denied with the fixed message.
    let other = decide("src/main.py");
    assert_eq!(other.action, Action::Deny);
    assert_eq!(
        other.message_for_model().as_deref(),
        Some(keel_core::policy::HEADLESS_DENIAL)
    );

    let listed = render_rules(&policy);
    assert!(listed.contains("generated/**"), "{listed}");
    assert!(
        listed.contains(dirs.project_file().to_str().unwrap()),
        "{listed}"
    );
}

#[test]
fn engine_config_carries_the_settings_and_refuses_rules_it_cannot_enforce() {
    let dirs = Dirs::new();
    dirs.write_user(
        "model = \"local/qwen\"\nmode = \"yolo\"\nmax_requests_per_turn = 7\nmax_tokens = 900\n\n\
         [providers.local]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodels = [\"qwen\", \"llama\"]\n\n\
         [tools.bash]\ntimeoutMs = 1500\n\n[tools.web_fetch]\nenabled = false\n\n[limits]\ngrepMatches = 5\n",
    );
    let effective = config::load(&dirs.options(true)).unwrap();
    let env: keel_core::agent::EnvLookup = std::sync::Arc::new(|_: &str| None);
    let scratch = tempfile::tempdir().unwrap();
    let engine =
        config::engine_config(&effective, env.clone(), scratch.path().into(), None).unwrap();
    assert_eq!(engine.model.as_deref(), Some("local/qwen"));
    assert_eq!(engine.models, ["local/qwen", "local/llama"]);
    assert_eq!(engine.providers.len(), 1);
    assert_eq!(engine.mode, keel_core::policy::Mode::Yolo);
    assert_eq!((engine.max_requests_per_turn, engine.max_tokens), (7, 900));
    assert_eq!(engine.limits.grep_matches, 5);
    assert_eq!(engine.disabled_tools, ["web_fetch"]);
    assert_eq!(
        engine.tool_timeouts.get("bash"),
        Some(&std::time::Duration::from_millis(1500))
    );
    assert_eq!(
        engine.global_config_dir.as_deref(),
        Some(dirs.home.join(".config/keel").as_path())
    );
    assert!(
        engine.manifest.shell.iter().any(|s| s.cmd == "*"),
        "the shell scope admits any program; rules decide"
    );
    let keel_engine = keel_core::agent::Engine::new(engine);
    let registry = keel_engine.registry().unwrap();
    assert!(registry.get("web_fetch").is_none());

    dirs.write_project("[[permission]]\npermission = \"bash\"\naction = \"deny\"\n");
    let effective = config::load(&dirs.options(true)).unwrap();
    let engine = config::engine_config(&effective, env, scratch.path().into(), None).unwrap();
    // The project file's rule reaches a session opened in that workspace.
    let session = keel_core::agent::Engine::new(engine)
        .open_session(keel_core::agent::SessionOptions {
            roots: vec![dirs.workspace.clone()],
            ..Default::default()
        })
        .unwrap();
    let registry = session.registry();
    let bash = registry.get("bash").unwrap();
    let args = serde_json::json!({"command": "ls"});
    let decision = session.policy().decide(&keel_core::policy::Call {
        spec: bash.spec(),
        target: &super::policy_support::target(bash.spec(), &args),
        runtime: session.runtime(),
    });
    assert_eq!(decision.action, keel_core::policy::Action::Deny);
    assert!(
        decision.explanation.to_string().contains("config.toml"),
        "{}",
        decision.explanation
    );
}

#[test]
fn compact_at_percent_is_a_percentage_and_reaches_the_engine() {
    let dirs = Dirs::new();
    for bad in ["0", "101"] {
        dirs.write_user(&format!("compact_at_percent = {bad}\n"));
        assert_eq!(
            load_err(&dirs.options(true)).to_string(),
            format!(
                "bad value for `compact_at_percent` at ~/.config/keel/config.toml:1:1: expected \
                 a percentage from 1 to 100, found {bad}"
            )
        );
    }
    dirs.write_user("compact_at_percent = 60\n");
    let effective = config::load(&dirs.options(true)).unwrap();
    assert_eq!(effective.config.compact_at_percent, 60);
    let env: keel_core::agent::EnvLookup = std::sync::Arc::new(|_: &str| None);
    let scratch = tempfile::tempdir().unwrap();
    let engine = config::engine_config(&effective, env, scratch.path().into(), None).unwrap();
    assert!((engine.compact_at - 0.6).abs() < 1e-9);
}

#[test]
fn a_project_file_can_only_make_the_sandbox_stricter() {
    use keel_core::runtime::sandbox::{Mechanism, SandboxMode};
    let dirs = Dirs::new();
    let env: keel_core::agent::EnvLookup = std::sync::Arc::new(|_: &str| None);
    let scratch = tempfile::tempdir().unwrap();
    let sandbox = |options: &LoadOptions| {
        let effective = config::load(options).unwrap();
        config::engine_config(&effective, env.clone(), scratch.path().into(), None)
            .unwrap()
            .sandbox
    };
    // The project cannot turn it off, add paths or open the network...
    dirs.write_project(
        "[sandbox]\nmode = \"off\"\nwritable = [\"/etc\"]\nreadable = [\"~/.ssh\"]\nnetwork = true\n\
         home_readable = [\".ssh\"]\n",
    );
    let spec = sandbox(&dirs.options(true));
    assert_eq!(spec.settings.mode, SandboxMode::Auto);
    assert!(spec.settings.writable.is_empty() && spec.settings.readable.is_empty());
    assert!(!spec.settings.network);
    assert_eq!(spec.settings.home_readable, None);
    // ... nor undo the user's `required`; it can require the sandbox itself.
    dirs.write_user("[sandbox]\nmode = \"required\"\nwritable = [\"~/scratch\"]\n");
    let spec = sandbox(&dirs.options(true));
    assert_eq!(spec.settings.mode, SandboxMode::Required);
    assert_eq!(spec.settings.writable, ["~/scratch"]);
    dirs.write_user("");
    dirs.write_project("[sandbox]\nmode = \"required\"\n");
    assert_eq!(
        sandbox(&dirs.options(true)).settings.mode,
        SandboxMode::Required
    );
    // The user's own choices: the file, and the environment over it.
    dirs.write_project("");
    dirs.write_user("[sandbox]\nmode = \"off\"\nnetwork = true\n");
    let spec = sandbox(&dirs.options(true));
    assert_eq!(spec.settings.mode, SandboxMode::Off);
    assert!(spec.settings.network);
    let mut options = dirs.options(true);
    options.overrides = config::env_overrides(|name| match name {
        "KEEL_SANDBOX" => Some("required".into()),
        "KEEL_SANDBOX_MECHANISM" => Some("landlock".into()),
        _ => None,
    });
    let spec = sandbox(&options);
    assert_eq!(spec.settings.mode, SandboxMode::Required);
    assert_eq!(spec.settings.mechanism, Mechanism::Landlock);
}
