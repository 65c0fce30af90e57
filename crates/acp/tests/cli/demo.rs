//! `keel demo`, as CI runs it (not a terminal): the whole offline session over a real `keel acp`
//! child, and nothing left behind.

use super::common::{Sandbox, run};

#[test]
fn demo_runs_offline_shows_the_session_and_leaves_nothing_behind() {
    let sandbox = Sandbox::new();
    let tmp = sandbox.home.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut command = sandbox.keel(&["demo"]);
    command.env("TMPDIR", &tmp);
    let out = run(command);
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    let transcript = &out.stdout;

    // Each tool call with its ACP kind and title.
    for call in [
        "● Read greet.py [read]",
        "● Update the plan [think]",
        "● Edit greet.py [edit]",
        "● sh test.sh [execute]",
    ] {
        assert!(transcript.contains(call), "no `{call}` in\n{transcript}");
    }
    // The permission prompt with the diff drawn by keel-diff, answered automatically.
    assert!(
        transcript.contains("permission: Edit greet.py [edit]"),
        "{transcript}"
    );
    assert!(transcript.contains("greet.py +1 −1"), "{transcript}");
    assert!(
        transcript.contains("-    return \"Helo, \" + name + \"!\""),
        "{transcript}"
    );
    assert!(
        transcript.contains("+    return \"Hello, \" + name + \"!\""),
        "{transcript}"
    );
    assert!(
        transcript.contains("not a terminal: answering \"allow once\" automatically"),
        "{transcript}"
    );
    assert!(
        !transcript.contains('\u{1b}'),
        "no colour when stdout is not a terminal"
    );
    // The command ran (after its own approval) and the tests passed on the edited file.
    assert!(
        transcript.contains("permission: sh test.sh [execute]"),
        "{transcript}"
    );
    assert!(transcript.contains("1 passed"), "{transcript}");
    // The plan, the answer and the stop reason.
    assert!(transcript.contains("[x] Run the tests"), "{transcript}");
    assert!(transcript.contains("agent: Done."), "{transcript}");
    assert!(transcript.contains("stop reason: end_turn"), "{transcript}");

    // The scratch copy is gone, and so is everything the agent made under TMPDIR.
    let scratch = transcript
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("keel demo: a scratch copy of the sample project in "))
        .unwrap();
    assert!(scratch.starts_with(tmp.to_str().unwrap()), "{scratch}");
    assert!(!std::path::Path::new(scratch).exists());
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
    assert!(left.is_empty(), "left behind in TMPDIR: {left:?}");
    // Nothing in the user's state or config directories either.
    assert!(!sandbox.home.join(".local/state/keel").exists());
    assert!(!sandbox.home.join(".config/keel").exists());
}
