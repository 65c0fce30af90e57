//! Text helpers for the titles tools give their calls ([`super::Tool::describe`]).

/// One line, at most `limit` characters, with an ellipsis when cut.
pub fn one_line(text: &str, limit: usize) -> String {
    let first = text.lines().next().unwrap_or("").trim_end();
    let cut: String = first.chars().take(limit).collect();
    if cut.len() < first.len() || text.trim_end().contains('\n') {
        format!("{} …", cut.trim_end())
    } else {
        cut
    }
}

/// Inline code that survives backticks in the text.
pub fn code(text: &str) -> String {
    if text.contains('`') {
        format!("`` {text} ``")
    } else {
        format!("`{text}`")
    }
}

/// The host of a URL (no scheme, credentials, port or path), or the URL itself.
pub fn url_host(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let host = authority.rsplit('@').next().unwrap_or(authority);
    let host = match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
        _ => host,
    };
    if host.is_empty() { url } else { host }
}

/// A string argument that says something (not empty).
pub fn given(value: Option<&str>) -> Option<&str> {
    value.filter(|v| !v.is_empty())
}
