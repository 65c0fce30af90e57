//! The allowlisted grammars under fire: random option soups built from every command's real
//! option list, and command lines too deep or too long to analyse.

use keel_core::policy::grammar::{Arity, Grammars, Operands, Style, Value};
use keel_core::policy::{Action, Call, Mode, Policy, Trust, render_check};
use serde_json::json;

use super::policy_support::{World, spec};

/// xorshift64*: deterministic, seeded, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Paths that are outside the workspace or credentials, however they are spelled.
fn forbidden_paths(world: &World) -> Vec<String> {
    vec![
        world.expand("{outside}/secret.txt"),
        "../outside/secret.txt".to_owned(),
        "link_out/secret.txt".to_owned(),
        "src/up/../outside/secret.txt".to_owned(),
        "/etc/passwd".to_owned(),
        "~/.ssh/id_rsa".to_owned(),
        ".env".to_owned(),
        ".e?v".to_owned(),
        "/proc/self/environ".to_owned(),
    ]
}

const INSIDE: &[&str] = &[
    "src/main.rs",
    "README.md",
    "src",
    "docs",
    "./src/../README.md",
];
const TEXT: &[&str] = &["5", "main", "auto", "%s", "x"];
/// What a program-valued option would be given.
const PROGRAMS: &[&str] = &["sh", "./evil.sh", "sh -c id", "/bin/sh"];

fn decide(policy: &Policy, world: &World, command: &str) -> (Action, String) {
    decide_timed(policy, world, command).0
}

/// The decision, its report, and how long the decision alone took.
fn decide_timed(
    policy: &Policy,
    world: &World,
    command: &str,
) -> ((Action, String), std::time::Duration) {
    let runtime = world.runtime("wide");
    let spec = spec("bash");
    let args = json!({ "command": command });
    let started = std::time::Instant::now();
    let decision = policy.decide(&Call {
        spec: &spec,
        target: &super::policy_support::target(&spec, &args),
        runtime: &runtime,
    });
    let took = started.elapsed();
    ((decision.action, render_check(&decision)), took)
}

/// A word for the value of an option of this kind; `bad` says whether it names something
/// forbidden.
fn value_word(rng: &mut Rng, kind: Value, forbidden: &[String]) -> (Vec<String>, bool) {
    match kind {
        Value::Text => (vec![(*rng.pick(TEXT)).to_owned()], false),
        Value::Pair => (
            vec![(*rng.pick(TEXT)).to_owned(), (*rng.pick(TEXT)).to_owned()],
            false,
        ),
        Value::Path => {
            if rng.below(3) == 0 {
                (vec![rng.pick(forbidden).clone()], true)
            } else {
                (vec![(*rng.pick(INSIDE)).to_owned()], false)
            }
        }
    }
}

fn quote(word: &str) -> String {
    shell_words::quote(word).into_owned()
}

/// A soup's operands, by the grammar's operand kind, and whether one is forbidden.
fn soup_operands(
    rng: &mut Rng,
    grammar: &keel_core::policy::grammar::Grammar,
    forbidden: &[String],
) -> (Vec<String>, bool) {
    let mut bad = false;
    let mut operands: Vec<String> = Vec::new();
    match grammar.operand_kind() {
        Operands::None => {}
        Operands::Text => {
            if rng.below(2) == 0 {
                operands.push(format!("+{}", rng.pick(TEXT)));
            }
        }
        Operands::Jq => operands.push(".name".to_owned()),
        Operands::PatternPath => operands.push("main".to_owned()),
        Operands::Path => {}
    }
    if matches!(
        grammar.operand_kind(),
        Operands::Path | Operands::PatternPath | Operands::Jq
    ) {
        for _ in 0..rng.below(3) {
            if rng.below(3) == 0 {
                bad = true;
                operands.push(rng.pick(forbidden).clone());
            } else {
                operands.push((*rng.pick(INSIDE)).to_owned());
            }
        }
    }
    (operands, bad)
}

/// One random call of a GNU-style grammar, and whether it names something forbidden (a
/// disallowed option, a program, a path outside the workspace or a credential).
fn soup(
    rng: &mut Rng,
    name: &str,
    grammar: &keel_core::policy::grammar::Grammar,
    forbidden: &[String],
) -> (String, bool) {
    let shorts: Vec<(char, Arity)> = grammar.short_options().collect();
    let longs: Vec<(String, Arity)> = grammar
        .long_options()
        .map(|(n, a)| (n.to_owned(), a))
        .collect();
    let known: Vec<String> = grammar.known_options().map(str::to_owned).collect();
    let mut words: Vec<String> = Vec::new();
    let mut bad = false;
    for _ in 0..rng.below(6) {
        match rng.below(10) {
            0..=3 if !longs.is_empty() => {
                let (long, arity) = rng.pick(&longs).clone();
                // Sometimes abbreviated, the way getopt_long would accept it.
                let written = if rng.below(4) == 0 && long.len() > 4 {
                    long[..3 + rng.below(long.len() - 3)].to_owned()
                } else {
                    long.clone()
                };
                match arity {
                    Arity::Flag => words.push(written),
                    Arity::Required(kind) | Arity::Optional(kind) => {
                        let (values, named) = value_word(rng, kind, forbidden);
                        bad |= named;
                        if kind == Value::Pair
                            || (matches!(arity, Arity::Required(_)) && rng.below(2) == 0)
                        {
                            words.push(written);
                            words.extend(values);
                        } else {
                            words.push(format!("{written}={}", values[0]));
                        }
                    }
                }
            }
            4..=6 if !shorts.is_empty() => {
                let (letter, arity) = *rng.pick(&shorts);
                match arity {
                    Arity::Flag => {
                        // A cluster of flags.
                        let mut cluster = format!("-{letter}");
                        for _ in 0..rng.below(3) {
                            let (other, a) = *rng.pick(&shorts);
                            if a == Arity::Flag {
                                cluster.push(other);
                            }
                        }
                        words.push(cluster);
                    }
                    Arity::Required(kind) | Arity::Optional(kind) => {
                        let (values, named) = value_word(rng, kind, forbidden);
                        bad |= named;
                        if kind == Value::Pair {
                            continue;
                        }
                        if matches!(arity, Arity::Optional(_)) || rng.below(2) == 0 {
                            words.push(format!("-{letter}{}", values[0]));
                        } else {
                            words.push(format!("-{letter}"));
                            words.push(values[0].clone());
                        }
                    }
                }
            }
            7 if !known.is_empty() => {
                // A real option that is not allowed, given a program or a path.
                let option = rng.pick(&known).clone();
                let written = if rng.below(2) == 0 && option.len() > 5 {
                    option[..4 + rng.below(option.len() - 4)].to_owned()
                } else {
                    option
                };
                bad = true;
                words.push(format!("{written}={}", rng.pick(PROGRAMS)));
            }
            8 => {
                // An option the grammar does not list (unless it abbreviates one it does).
                let word = format!("--{}", rng.pick(&["pre", "exec", "output", "o", "eval"]));
                // (One that abbreviates a listed option would take the next word as its value.)
                if !longs.iter().any(|(long, _)| long.starts_with(&word)) {
                    bad = true;
                    words.push(word);
                }
            }
            _ => {}
        }
    }
    let (operands, named) = soup_operands(rng, grammar, forbidden);
    bad |= named;
    if !operands.is_empty() && rng.below(3) == 0 {
        words.push("--".to_owned());
    }
    words.extend(operands);
    let line = std::iter::once(name.to_owned())
        .chain(words.iter().map(|w| quote(w)))
        .collect::<Vec<_>>()
        .join(" ");
    (line, bad)
}

/// For every GNU-style grammar, random soups of its options either stay inside the grammar or
/// ask; none is allowed while naming a disallowed option, a program or a forbidden path.
#[test]
fn option_soups_are_allowed_only_inside_the_grammar() {
    let world = World::new();
    let policy = world.policy(Mode::Allowlist, false, Trust::Unknown);
    let forbidden = forbidden_paths(&world);
    let seed = std::env::var("KEEL_SOUP_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_1234_u64);
    let mut rng = Rng(seed);
    let mut allowed = 0;
    let mut asked = 0;
    let mut tried = 0;
    for grammar in Grammars::bundled().iter() {
        // (echo and friends print any word: there is nothing to forbid.)
        if grammar.style() != Style::Gnu || grammar.options_as_text() {
            continue;
        }
        for _ in 0..60 {
            let (line, bad) = soup(&mut rng, &grammar.name, grammar, &forbidden);
            let (action, report) = decide(&policy, &world, &line);
            tried += 1;
            match action {
                Action::Allow => {
                    allowed += 1;
                    assert!(
                        !bad,
                        "seed {seed}: `{line}` names something forbidden and was allowed\n{report}"
                    );
                }
                Action::Ask => asked += 1,
                Action::Deny => {}
            }
        }
    }
    // The soups exercise both sides.
    assert!(allowed > tried / 10, "{allowed} of {tried} allowed");
    assert!(asked > tried / 10, "{asked} of {tried} asked");
}

/// A grammar's own table: every allowed long option, written in full with a value inside the
/// workspace, keeps the call read-only; every known-only option asks.
#[test]
fn every_listed_option_is_read_only_and_every_known_option_asks() {
    let world = World::new();
    // (A recursive search of a workspace holding `.env` asks; this one holds no credential.)
    std::fs::remove_file(world.ws.join(".env")).unwrap();
    let policy = world.policy(Mode::Allowlist, false, Trust::Unknown);
    for grammar in Grammars::bundled().iter() {
        if grammar.style() != Style::Gnu {
            continue;
        }
        for (long, arity) in grammar.long_options() {
            let call = match arity {
                Arity::Flag | Arity::Optional(_) => format!("{} {long}", grammar.name),
                Arity::Required(Value::Text) => format!("{} {long}=5", grammar.name),
                Arity::Required(Value::Path) => format!("{} {long}=README.md", grammar.name),
                Arity::Required(Value::Pair) => format!("{} {long} a b", grammar.name),
            };
            let call = match grammar.operand_kind() {
                Operands::Jq => format!("{call} ."),
                _ => call,
            };
            // `--help` of git subcommands is not listed; others may be.
            let (action, report) = decide(&policy, &world, &call);
            assert_eq!(action, Action::Allow, "`{call}`\n{report}");
        }
        for known in grammar.known_options() {
            let call = format!("{} {known}=x", grammar.name);
            let (action, report) = decide(&policy, &world, &call);
            assert_eq!(action, Action::Ask, "`{call}`\n{report}");
            assert!(report.contains("outside the read-only grammar"), "{report}");
        }
    }
}

/// Lines too deep or too long to analyse are asked (denied without a user, escalated in
/// yolo), and analysing them needs no deeper stack than a quarter of a tokio worker's.
#[test]
fn lines_beyond_the_bounds_are_asked_on_a_small_stack() {
    let world = World::new();
    let long = format!("echo {}", "a ".repeat(5 * 1024 * 1024));
    let nested = format!("{}ls{}", "(".repeat(100_000), ")".repeat(100_000));
    let substituted = format!("echo {}id{}", "$(".repeat(40_000), ")".repeat(40_000));
    let chained = vec!["ls"; 20_000].join(" && ");
    let lines = [long, nested, substituted, chained];
    std::thread::Builder::new()
        .stack_size(512 * 1024)
        .spawn(move || {
            for (mode, headless, expected) in [
                (Mode::Allowlist, false, Action::Ask),
                (Mode::Allowlist, true, Action::Deny),
                (Mode::Yolo, false, Action::Ask),
            ] {
                let policy = world.policy(mode, headless, Trust::Unknown);
                for line in &lines {
                    let ((action, report), took) = decide_timed(&policy, &world, line);
                    let shown: String = line.chars().take(40).collect();
                    assert_eq!(
                        action,
                        expected,
                        "{mode:?} headless={headless}: {shown}...\n{}",
                        report.chars().take(2000).collect::<String>()
                    );
                    assert!(
                        report.contains("too large or too deeply nested")
                            || report.contains("too long to analyse")
                            || report.contains("words")
                            || report.contains("nests more than")
                            || report.contains("headless"),
                        "{}",
                        report.chars().take(2000).collect::<String>()
                    );
                    eprintln!(
                        "{mode:?} headless={headless} {} bytes: {:?}",
                        line.len(),
                        took
                    );
                }
            }
        })
        .unwrap()
        .join()
        .unwrap();
}
