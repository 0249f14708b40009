//! Event fixtures: the task payloads recorded from a drill's execution
//! history (`functions/<name>/events/*.json`), parsed as the functions parse
//! them.

use handover::error::ErrorName;
use handover::execution::TaskInput;
use serde_json::Value;

/// Parse a task fixture; panics with the reason when it does not parse or
/// does not name a Step Functions execution.
pub fn task(json: &str) -> TaskInput {
    let event: Value = serde_json::from_str(json).expect("fixture is JSON");
    let task =
        TaskInput::from_event(event).unwrap_or_else(|e| panic!("fixture refused: {}", e.message));
    assert!(
        task.execution.starts_with("arn:aws:states:"),
        "not an execution ARN: {}",
        task.execution
    );
    task
}

/// The fixture without the field at JSON `pointer` is `Handover.InvalidInput`
/// and the message names `named`.
pub fn refused_without(json: &str, pointer: &str, named: &str) {
    let mut event: Value = serde_json::from_str(json).expect("fixture is JSON");
    let (parent, last) = pointer.rsplit_once('/').expect("a JSON pointer");
    event
        .pointer_mut(parent)
        .and_then(Value::as_object_mut)
        .and_then(|o| o.remove(last))
        .unwrap_or_else(|| panic!("{pointer} is not in the fixture"));
    let err = match TaskInput::from_event(event) {
        Ok(_) => panic!("accepted without {pointer}"),
        Err(e) => e,
    };
    assert_eq!(err.name, ErrorName::InvalidInput, "{}", err.message);
    assert!(err.message.contains(named), "{}", err.message);
}
