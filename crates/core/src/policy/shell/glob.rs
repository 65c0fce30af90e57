//! Pathname expansion with bash's semantics, so that what Keel analyses is what runs: a word's
//! unquoted `*`, `?` and `[...]` are matched here, against the file system, and the command
//! runs with the matches as literal words ([`super::render`]).
//!
//! The dialect is bash 5.2's default (no `extglob`, `nullglob`, `failglob`, `dotglob`,
//! `nocaseglob`; `globskipdots` and `globasciiranges` on): `*` and `?` match within one path
//! component, `[...]` with `!` or `^` negation, ranges by code point and the POSIX classes
//! (`[:alpha:]`, ... over ASCII); a name that begins with `.` is matched only by a pattern
//! component that begins with `.`, and `.` and `..` never; a word that matches nothing stays
//! as it is (its quotes removed). The matches are sorted by bytes, as in the C locale.
//! Equivalence classes (`[=a=]`), collating symbols (`[.a.]`), an unknown class name and a
//! quoted character inside brackets are not expanded: the word cannot be rendered.

use std::path::{Path, PathBuf};

use crate::tool::view::code;

/// How many directory entries one word's expansion may look at.
pub const MAX_GLOB_ENTRIES: usize = 20_000;

/// One character of a word, and whether it is active (unquoted: `*`, `?`, `[`, a leading `~`
/// mean something to the shell).
pub type Char = (char, bool);

/// Whether a word holds an active pattern character.
pub fn is_pattern(word: &[Char]) -> bool {
    word.iter()
        .any(|&(c, active)| active && matches!(c, '*' | '?' | '['))
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Literal(char),
    Any,
    Star,
    Bracket { negated: bool, items: Vec<Item> },
}

#[derive(Debug, Clone, PartialEq)]
enum Item {
    Char(char),
    Range(char, char),
    Class(Class),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Class {
    Alnum,
    Alpha,
    Ascii,
    Blank,
    Cntrl,
    Digit,
    Graph,
    Lower,
    Print,
    Punct,
    Space,
    Upper,
    Word,
    Xdigit,
}

impl Class {
    fn named(name: &str) -> Option<Class> {
        Some(match name {
            "alnum" => Class::Alnum,
            "alpha" => Class::Alpha,
            "ascii" => Class::Ascii,
            "blank" => Class::Blank,
            "cntrl" => Class::Cntrl,
            "digit" => Class::Digit,
            "graph" => Class::Graph,
            "lower" => Class::Lower,
            "print" => Class::Print,
            "punct" => Class::Punct,
            "space" => Class::Space,
            "upper" => Class::Upper,
            "word" => Class::Word,
            "xdigit" => Class::Xdigit,
            _ => return None,
        })
    }

    fn contains(self, c: char) -> bool {
        match self {
            Class::Alnum => c.is_ascii_alphanumeric(),
            Class::Alpha => c.is_ascii_alphabetic(),
            Class::Ascii => c.is_ascii(),
            Class::Blank => matches!(c, ' ' | '\t'),
            Class::Cntrl => c.is_ascii_control(),
            Class::Digit => c.is_ascii_digit(),
            Class::Graph => c.is_ascii_graphic(),
            Class::Lower => c.is_ascii_lowercase(),
            Class::Print => c.is_ascii_graphic() || c == ' ',
            Class::Punct => c.is_ascii_punctuation(),
            Class::Space => matches!(c, ' ' | '\t' | '\n' | '\u{b}' | '\u{c}' | '\r'),
            Class::Upper => c.is_ascii_uppercase(),
            Class::Word => c.is_ascii_alphanumeric() || c == '_',
            Class::Xdigit => c.is_ascii_hexdigit(),
        }
    }
}

/// Compiles one path component. `Err` names a construct Keel does not expand.
// String error: the reason the command cannot be rendered, shown in the decision.
fn compile(part: &[Char]) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < part.len() {
        let (c, active) = part[i];
        if !active {
            tokens.push(Token::Literal(c));
            i += 1;
            continue;
        }
        match c {
            '*' => {
                if tokens.last() != Some(&Token::Star) {
                    tokens.push(Token::Star);
                }
                i += 1;
            }
            '?' => {
                tokens.push(Token::Any);
                i += 1;
            }
            '[' => match bracket(part, i + 1)? {
                Some((token, next)) => {
                    tokens.push(token);
                    i = next;
                }
                // No closing `]`: the `[` is an ordinary character.
                None => {
                    tokens.push(Token::Literal('['));
                    i += 1;
                }
            },
            other => {
                tokens.push(Token::Literal(other));
                i += 1;
            }
        }
    }
    Ok(tokens)
}

/// A bracket expression starting after its `[` at `start`: the token and the index after its
/// `]`, or `None` when it has no closing `]`.
// String error: the reason the command cannot be rendered, shown in the decision.
fn bracket(part: &[Char], start: usize) -> Result<Option<(Token, usize)>, String> {
    let mut i = start;
    let mut negated = false;
    if let Some(&(c, true)) = part.get(i)
        && (c == '!' || c == '^')
    {
        negated = true;
        i += 1;
    }
    let mut items = Vec::new();
    let mut first = true;
    loop {
        let Some(&(c, active)) = part.get(i) else {
            return Ok(None);
        };
        if !active {
            return Err("a quoted character inside a bracket expression `[...]`".to_owned());
        }
        if c == ']' && !first {
            return Ok(Some((Token::Bracket { negated, items }, i + 1)));
        }
        first = false;
        if c == '[' {
            match part.get(i + 1) {
                Some((':', _)) => {
                    let rest: String = part[i + 2..].iter().map(|&(c, _)| c).collect();
                    let Some(end) = rest.find(":]") else {
                        return Err("an unterminated character class `[:`".to_owned());
                    };
                    let name = &rest[..end];
                    let class = Class::named(name).ok_or_else(|| {
                        format!(
                            "an unknown character class {}",
                            code(&format!("[:{name}:]"))
                        )
                    })?;
                    items.push(Item::Class(class));
                    i += 2 + name.chars().count() + 2;
                    continue;
                }
                Some(('=' | '.', _)) => {
                    return Err(
                        "an equivalence class or collating symbol (`[=a=]`, `[.a.]`)".to_owned(),
                    );
                }
                _ => {}
            }
        }
        match (part.get(i + 1), part.get(i + 2)) {
            (Some(&('-', _)), Some(&(end, end_active))) if !(end == ']' && end_active) => {
                if !end_active {
                    return Err("a quoted character inside a bracket expression `[...]`".to_owned());
                }
                if end == '[' {
                    return Err("a range that ends in a class `[a-[:x:]]`".to_owned());
                }
                items.push(Item::Range(c, end));
                i += 3;
            }
            _ => {
                items.push(Item::Char(c));
                i += 1;
            }
        }
    }
}

fn bracket_matches(negated: bool, items: &[Item], c: char) -> bool {
    let hit = items.iter().any(|item| match item {
        Item::Char(x) => *x == c,
        Item::Range(lo, hi) => *lo <= c && c <= *hi,
        Item::Class(class) => class.contains(c),
    });
    hit != negated
}

/// Whether `name` matches the compiled component (backtracking over the last `*`).
fn matches(tokens: &[Token], name: &[char]) -> bool {
    let (mut t, mut n) = (0, 0);
    let mut resume: Option<(usize, usize)> = None;
    while n < name.len() {
        let step = match tokens.get(t) {
            Some(Token::Star) => {
                resume = Some((t, n));
                t += 1;
                continue;
            }
            Some(Token::Any) => true,
            Some(Token::Literal(c)) => *c == name[n],
            Some(Token::Bracket { negated, items }) => bracket_matches(*negated, items, name[n]),
            None => false,
        };
        if step {
            t += 1;
            n += 1;
        } else if let Some((star, at)) = resume {
            t = star + 1;
            n = at + 1;
            resume = Some((star, at + 1));
        } else {
            return false;
        }
    }
    tokens[t..].iter().all(|token| *token == Token::Star)
}

/// Expands `word` (relative paths from `cwd`) as bash does: `Ok(None)` when it holds no
/// pattern or matches nothing (the word stays as it is), the sorted matches otherwise; `Err`
/// names why Keel does not expand it (the command then cannot be rendered).
// String error: the reason the command cannot be rendered, shown in the decision.
pub fn expand(word: &[Char], cwd: &Path) -> Result<Option<Vec<String>>, String> {
    if !is_pattern(word) {
        return Ok(None);
    }
    let parts: Vec<&[Char]> = word.split(|&(c, _)| c == '/').collect();
    let absolute = word.first().is_some_and(|&(c, _)| c == '/');
    let start = if absolute {
        PathBuf::from("/")
    } else {
        cwd.to_path_buf()
    };
    // (the match as the shell writes it, where it is)
    let mut current: Vec<(String, PathBuf)> = vec![(String::new(), start)];
    let mut budget = MAX_GLOB_ENTRIES;
    for (index, part) in parts.iter().enumerate() {
        if index > 0 {
            for (text, _) in &mut current {
                text.push('/');
            }
        }
        if part.is_empty() {
            continue;
        }
        if !is_pattern(part) {
            let literal: String = part.iter().map(|&(c, _)| c).collect();
            for (text, path) in &mut current {
                text.push_str(&literal);
                path.push(&literal);
            }
            continue;
        }
        let tokens = compile(part)?;
        let dot = part.first().is_some_and(|&(c, _)| c == '.');
        let mut next = Vec::new();
        for (text, dir) in &current {
            let Ok(entries) = crate::runtime::probe::dir_entries(dir, budget) else {
                continue;
            };
            let entries = entries.ok_or_else(|| {
                format!("a pattern that would look at more than {MAX_GLOB_ENTRIES} names")
            })?;
            budget = budget.saturating_sub(entries.len());
            for entry in entries {
                let Some(name) = entry.file_name() else {
                    continue;
                };
                let name = name.to_str().ok_or_else(|| {
                    format!(
                        "a pattern over a directory holding a name that is not UTF-8 ({})",
                        code(&dir.display().to_string())
                    )
                })?;
                if name.starts_with('.') && !dot {
                    continue;
                }
                let chars: Vec<char> = name.chars().collect();
                if matches(&tokens, &chars) {
                    next.push((format!("{text}{name}"), dir.join(name)));
                }
            }
        }
        current = next;
        if current.is_empty() {
            return Ok(None);
        }
    }
    let directory_only = parts.last().is_some_and(|part| part.is_empty());
    let mut found: Vec<String> = current
        .into_iter()
        .filter(|(_, path)| {
            if directory_only {
                crate::runtime::probe::is_dir(path)
            } else {
                crate::runtime::probe::symlink_metadata(path).is_ok()
            }
        })
        .map(|(text, _)| text)
        .collect();
    if found.is_empty() {
        return Ok(None);
    }
    found.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    Ok(Some(found))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn active(text: &str) -> Vec<Char> {
        text.chars().map(|c| (c, true)).collect()
    }

    fn hit(pattern: &str, name: &str) -> bool {
        let tokens = compile(&active(pattern)).unwrap();
        matches(&tokens, &name.chars().collect::<Vec<_>>())
    }

    #[test]
    fn patterns_match_as_bash_matches_them() {
        assert!(hit(".e[[:alpha:]]v", ".env"));
        assert!(!hit(".e[[:digit:]]v", ".env"));
        assert!(hit("[!a]*", "bc"));
        assert!(hit("[^a]*", "bc"));
        assert!(!hit("[^a]*", "ab"));
        assert!(hit("[]a]", "]"));
        assert!(hit("[a-]", "-"));
        assert!(hit("a[b-d]*e", "acxxe"));
        assert!(hit("*.rs", "main.rs"));
        assert!(hit("*a*a*", "banana"));
        assert!(!hit("*a*b", "banana"));
        assert!(hit("[", "["));
        assert!(hit("a[", "a["));
        assert!(!hit("[z-a]", "m"));
        assert!(compile(&active("[[=a=]]")).is_err());
        assert!(compile(&active("[[:nope:]]")).is_err());
    }

    #[test]
    fn quoted_characters_are_literal() {
        let word: Vec<Char> = vec![('*', false), ('x', true)];
        assert!(!is_pattern(&word));
        let tokens = compile(&[('*', false), ('*', true)]).unwrap();
        assert!(matches(&tokens, &['*', 'a']));
        assert!(!matches(&tokens, &['a', 'a']));
    }
}
