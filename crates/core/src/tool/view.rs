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

/// Whether `c` changes how the text around it is drawn rather than being a character of its
/// own: control characters (newline and tab included), the bidirectional embedding, override
/// and isolate marks (which can reorder a line as shown), zero-width characters, the line and
/// paragraph separators and the byte-order mark.
pub fn is_display_control(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{2069}'
                | '\u{FEFF}'
                | '\u{061C}'
        )
}

/// `text` with every [`is_display_control`] character written as an escape (`\n`, `\t`,
/// `\u{202e}`) and backslashes doubled, so a string from a project file or a model shows as
/// exactly one line, in its own order, and cannot draw lines or layout of its own.
pub fn escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_display_control(c) => out.push_str(&format!("\\u{{{:04x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    out
}

/// `text` [`escaped`] and in double quotes (inner quotes escaped): how a string someone else
/// chose is shown inside a sentence of Keel's.
pub fn quoted(text: &str) -> String {
    format!("\"{}\"", escaped(text).replace('"', "\\\""))
}

/// The longest run of backticks in `text`.
fn longest_backtick_run(text: &str) -> usize {
    text.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

/// `text` as a Markdown code span inside one of Keel's sentences (a permission card is
/// Markdown): between backtick runs longer than any it holds, so a backtick in a file name or a
/// command cannot end the span and add Markdown of its own. A text holding a line break or
/// another display control is [`escaped`] first: a blank line would end the paragraph, and the
/// span with it.
pub fn code(text: &str) -> String {
    let shown = if text.chars().any(is_display_control) {
        std::borrow::Cow::Owned(escaped(text))
    } else {
        std::borrow::Cow::Borrowed(text)
    };
    let fence = "`".repeat(longest_backtick_run(&shown) + 1);
    let pad = if shown.starts_with('`') || shown.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{shown}{pad}{fence}")
}

/// `text` as a fenced Markdown code block in `language`: the fence is longer than any backtick
/// run the text holds (three at least), so no line of it closes the block.
pub fn code_block(language: &str, text: &str) -> String {
    let fence = "`".repeat((longest_backtick_run(text) + 1).max(3));
    format!("{fence}{language}\n{text}\n{fence}")
}

#[cfg(test)]
mod escape_tests {
    use super::*;

    #[test]
    fn escapes_lines_controls_and_bidi() {
        assert_eq!(escaped("a\nb\tc\u{1b}[2J"), "a\\nb\\tc\\u{001b}[2J");
        assert_eq!(escaped("x\u{202e}y\u{2066}"), "x\\u{202e}y\\u{2066}");
        assert_eq!(quoted("say \"hi\"\\"), "\"say \\\"hi\\\"\\\\\"");
        assert_eq!(quoted("plain"), "\"plain\"");
    }

    #[test]
    fn code_spans_and_blocks_outlast_the_backticks_inside() {
        assert_eq!(code("src/main.rs"), "`src/main.rs`");
        assert_eq!(code("a` **b** `c"), "``a` **b** `c``");
        assert_eq!(code("`x``"), "``` `x`` ```");
        assert_eq!(code("a\n\nb"), "`a\\n\\nb`");
        assert_eq!(code_block("sh", "ls"), "```sh\nls\n```");
        assert_eq!(code_block("sh", "x\n```\ny"), "````sh\nx\n```\ny\n````");
    }
}
