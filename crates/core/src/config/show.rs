//! The effective configuration as a person reads it, and the JSON Schema of the file format.

use serde_json::Value as Json;

use super::{Config, Effective};

/// Root keys in documentation order; tables follow, then the rules.
const ROOT_KEYS: &[&str] = &[
    "model",
    "mode",
    "max_requests_per_turn",
    "max_tokens",
    "thinking",
];

/// The effective configuration as TOML, each value followed by a comment saying where it came
/// from (`# default`, `# ~/.config/keel/config.toml:3:1`, `# environment variable KEEL_MODE`,
/// `# flag --mode`). The output is itself a valid configuration file.
pub fn render_annotated(effective: &Effective) -> String {
    let mut out = String::new();
    for file in &effective.files {
        let state = if file.found { "" } else { " (not found)" };
        out.push_str(&format!("# {} file: {}{state}\n", file.layer, file.shown));
    }
    if !effective.ignored.is_empty() {
        out.push_str("# ignored: the project is not trusted (`keel trust grant` applies these):\n");
        for setting in &effective.ignored {
            out.push_str(&format!("#   {setting}\n"));
        }
    }
    let table = match toml::Table::try_from(&effective.config) {
        Ok(table) => table,
        Err(e) => return format!("{out}# cannot render the configuration: {e}\n"),
    };
    let mut section = Section::default();
    if !table.contains_key("model") {
        out.push_str("# model is not set: the provider layer picks its default\n");
    }
    for key in ROOT_KEYS {
        if let Some(value) = table.get(*key) {
            section.line(key, value, effective, key);
        }
    }
    out.push_str(&section.finish());

    if let Some(toml::Value::Table(limits)) = table.get("limits") {
        render_table(&mut out, "limits", limits, effective);
    }
    for group in ["providers", "tools"] {
        if let Some(toml::Value::Table(entries)) = table.get(group) {
            for (name, value) in entries {
                if let toml::Value::Table(inner) = value {
                    render_table(
                        &mut out,
                        &format!("{group}.{}", key_text(name)),
                        inner,
                        effective,
                    );
                }
            }
        }
    }
    if let Some(toml::Value::Array(rules)) = table.get("permission") {
        for (i, rule) in rules.iter().enumerate() {
            let source = effective.sources.get(&format!("permission[{i}]"));
            out.push_str(&format!("\n[[permission]]  # {source}\n"));
            if let toml::Value::Table(fields) = rule {
                for (key, value) in fields {
                    out.push_str(&format!("{} = {value}\n", key_text(key)));
                }
            }
        }
    }
    out
}

fn render_table(out: &mut String, header: &str, table: &toml::Table, effective: &Effective) {
    out.push_str(&format!("\n[{header}]\n"));
    let mut section = Section::default();
    for (key, value) in table {
        // Provenance paths use the raw names, headers the quoted ones.
        let raw_header = header.replace('"', "");
        section.line(key, value, effective, &format!("{raw_header}.{key}"));
    }
    out.push_str(&section.finish());
}

/// Lines of one table, aligned so the source comments form a column.
#[derive(Default)]
struct Section {
    lines: Vec<(String, String)>,
}

impl Section {
    fn line(&mut self, key: &str, value: &toml::Value, effective: &Effective, path: &str) {
        let source = effective.sources.get(path);
        self.lines
            .push((format!("{} = {value}", key_text(key)), source.to_string()));
    }

    fn finish(self) -> String {
        let width = self
            .lines
            .iter()
            .map(|(l, _)| l.chars().count())
            .max()
            .unwrap_or(0)
            .min(48);
        self.lines
            .into_iter()
            .map(|(line, source)| format!("{line:<width$}  # {source}\n"))
            .collect()
    }
}

/// A key as TOML writes it (bare when possible, quoted otherwise).
fn key_text(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if bare {
        key.to_owned()
    } else {
        toml::Value::String(key.to_owned()).to_string()
    }
}

/// The JSON Schema of a configuration file (draft-07, which TOML language servers such as
/// taplo understand), generated from [`Config`].
pub fn json_schema() -> Json {
    let generator = schemars::generate::SchemaSettings::draft07().into_generator();
    generator.into_root_schema_for::<Config>().to_value()
}
