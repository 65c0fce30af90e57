//! Markdown front matter, read the same way for agent definitions (`agents/*.md`) and skills
//! (`SKILL.md`).

use std::collections::HashMap;

/// A Markdown file's front matter (`key: value` lines between `---` lines; a value may be a
/// `[a, b]` list, a comma-separated list or `- item` lines) and its body.
pub fn front_matter(text: &str) -> Option<(HashMap<String, Vec<String>>, String)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines();
    if lines.next()?.trim() != "---" {
        return None;
    }
    let mut fields: HashMap<String, Vec<String>> = HashMap::new();
    let mut last: Option<String> = None;
    let mut closed = false;
    let mut consumed = 1;
    for line in lines.by_ref() {
        consumed += 1;
        if line.trim() == "---" {
            closed = true;
            break;
        }
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if let Some(item) = trimmed.strip_prefix("- ")
            && line.starts_with([' ', '\t', '-'])
            && let Some(key) = &last
        {
            fields
                .entry(key.clone())
                .or_default()
                .push(unquote(item).to_owned());
            continue;
        }
        let Some((key, value)) = trimmed.split_once(':') else {
            continue;
        };
        let key = key.trim().to_owned();
        let value = value.trim();
        let values: Vec<String> = if let Some(list) = value
            .strip_prefix('[')
            .and_then(|rest| rest.strip_suffix(']'))
        {
            list.split(',')
                .map(|item| unquote(item.trim()).to_owned())
                .filter(|item| !item.is_empty())
                .collect()
        } else if value.is_empty() {
            Vec::new()
        } else {
            vec![unquote(value).to_owned()]
        };
        fields.insert(key.clone(), values);
        last = Some(key);
    }
    if !closed {
        return None;
    }
    let body: Vec<&str> = text.lines().skip(consumed).collect();
    Some((fields, body.join("\n").trim().to_owned()))
}

fn unquote(value: &str) -> &str {
    let value = value.trim();
    for quote in ['"', '\''] {
        if let Some(inner) = value
            .strip_prefix(quote)
            .and_then(|rest| rest.strip_suffix(quote))
        {
            return inner;
        }
    }
    value
}
