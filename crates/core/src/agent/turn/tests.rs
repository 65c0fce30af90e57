use super::*;
use crate::agent::stream::Response;

#[test]
fn civil_dates() {
    assert_eq!(crate::store::civil_from_days(0), (1970, 1, 1));
    assert_eq!(crate::store::civil_from_days(20_414), (2025, 11, 22));
    assert_eq!(crate::store::civil_from_days(11_016), (2000, 2, 29));
}

#[test]
fn user_content_merges_after_an_interrupted_turn() {
    let mut history = vec![Message::user_text("a")];
    crate::provider::push_merged(&mut history, Message::user_text("b"));
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].content.len(), 2);
    history.push(Message::assistant_text("x"));
    crate::provider::push_merged(&mut history, Message::user_text("c"));
    assert_eq!(history.len(), 3);
}

#[test]
fn thinking_is_flushed_before_text_and_tool_use() {
    let mut response = Response::default();
    response.thinking.push_str("hmm");
    response.push_text("hi");
    assert_eq!(
        response.parts,
        vec![
            Part::Thinking {
                text: "hmm".into(),
                signature: None
            },
            Part::Text("hi".into())
        ]
    );
}
