//! Block Kit messages as the Slack stand-in recorded them.

use serde_json::{Value, json};

/// Every button in a Block Kit message: (action_id, value).
pub fn collect_buttons(v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(o) => {
            if o.get("type") == Some(&json!("button"))
                && let (Some(a), Some(k)) = (
                    o.get("action_id").and_then(Value::as_str),
                    o.get("value").and_then(Value::as_str),
                )
            {
                out.push((a.to_owned(), k.to_owned()));
            }
            o.values().for_each(|x| collect_buttons(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| collect_buttons(x, out)),
        _ => {}
    }
}
