use super::*;
use serde_json::json;

const FORM: Option<&str> = Some("application/x-www-form-urlencoded");
const KEY: &str = "q2T8f3K9aZ0wXy1VbN4mLg";

/// A block_actions payload shaped like the one Slack sends.
fn payload(action_id: &str, value: &str) -> Value {
    json!({
        "type": "block_actions",
        "user": {"id": "U0ONCALL01", "username": "oncall1", "name": "oncall1", "team_id": "T0TEAM0001"},
        "api_app_id": "A0APP00001",
        "token": "legacy-verification-token",
        "container": {"type": "message", "message_ts": "1764511915.000100", "channel_id": "C0123456789", "is_ephemeral": false},
        "trigger_id": "1.2.3",
        "team": {"id": "T0TEAM0001", "domain": "shop"},
        "enterprise": null,
        "is_enterprise_install": false,
        "channel": {"id": "C0123456789", "name": "incidents"},
        "message": {"type": "message", "ts": "1764511915.000100", "blocks": [{"type": "header", "block_id": "h"}]},
        "state": {"values": {}},
        "response_url": "https://hooks.slack.com/actions/T0TEAM0001/1/abc",
        "actions": [{"action_id": action_id, "block_id": "handover_actions", "text": {"type": "plain_text", "text": "Approve"}, "value": value, "type": "button", "action_ts": "1764511990.1"}]
    })
}

fn form(payload: &Value) -> Vec<u8> {
    form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", &payload.to_string())
        .finish()
        .into_bytes()
}

#[test]
fn each_button_becomes_its_decision() {
    let d = parse(FORM, &form(&payload(ACTION_APPROVE, KEY))).unwrap();
    assert_eq!(
        (d.decision, d.data_loss_acknowledged),
        (Decision::Approve, false)
    );
    assert_eq!(d.key, KEY);
    assert_eq!(d.user_id, "U0ONCALL01");
    assert_eq!(d.user_name.as_deref(), Some("oncall1"));
    assert_eq!(d.team_id.as_deref(), Some("T0TEAM0001"));
    assert_eq!(d.channel_id.as_deref(), Some("C0123456789"));
    assert_eq!(d.original_blocks.as_ref().map(Vec::len), Some(1));
    let d = parse(FORM, &form(&payload(ACTION_APPROVE_DATA_LOSS, KEY))).unwrap();
    assert_eq!(
        (d.decision, d.data_loss_acknowledged),
        (Decision::Approve, true)
    );
    let d = parse(
        Some("application/x-www-form-urlencoded; charset=utf-8"),
        &form(&payload(ACTION_REJECT, KEY)),
    )
    .unwrap();
    assert_eq!(
        (d.decision, d.data_loss_acknowledged),
        (Decision::Reject, false)
    );
}

#[test]
fn a_body_that_is_not_form_encoded_is_refused() {
    let json_body = payload(ACTION_APPROVE, KEY).to_string();
    let err = parse(Some("application/json"), json_body.as_bytes()).unwrap_err();
    assert!(
        matches!(err, InteractionError::NotFormEncoded(Some(ref c)) if c == "application/json"),
        "{err}"
    );
    let err = parse(None, &form(&payload(ACTION_APPROVE, KEY))).unwrap_err();
    assert!(
        matches!(err, InteractionError::NotFormEncoded(None)),
        "{err}"
    );
    let err = parse(FORM, &[b'p', 0xff, 0xfe]).unwrap_err();
    assert!(matches!(err, InteractionError::NotUtf8), "{err}");
}

#[test]
fn a_form_without_payload_is_refused() {
    let err = parse(FORM, b"command=%2Fdeploy&text=now").unwrap_err();
    assert!(matches!(err, InteractionError::MissingPayload), "{err}");
    let err = parse(FORM, b"").unwrap_err();
    assert!(matches!(err, InteractionError::MissingPayload), "{err}");
    let err = parse(FORM, b"payload=%7B%7D&payload=%7B%7D").unwrap_err();
    assert!(matches!(err, InteractionError::RepeatedPayload(2)), "{err}");
}

#[test]
fn a_payload_that_is_not_json_is_refused() {
    let err = parse(FORM, b"payload=approve%20please").unwrap_err();
    assert!(matches!(err, InteractionError::PayloadNotJson(_)), "{err}");
}

#[test]
fn an_unknown_action_is_refused() {
    let err = parse(FORM, &form(&payload("delete_everything", KEY))).unwrap_err();
    assert!(
        matches!(err, InteractionError::UnknownAction(ref a) if a == "delete_everything"),
        "{err}"
    );
}

#[test]
fn other_interaction_types_and_shapes_are_refused_with_their_reason() {
    let mut p = payload(ACTION_APPROVE, KEY);
    p["type"] = json!("view_submission");
    assert!(matches!(
        parse(FORM, &form(&p)).unwrap_err(),
        InteractionError::NotBlockActions(_)
    ));

    let mut p = payload(ACTION_APPROVE, KEY);
    p["user"].as_object_mut().unwrap().remove("id");
    let err = parse(FORM, &form(&p)).unwrap_err();
    assert!(err.to_string().contains("user"), "{err}");
    assert!(matches!(err, InteractionError::Shape { .. }), "{err}");

    let mut p = payload(ACTION_APPROVE, KEY);
    p["actions"] = json!([]);
    assert!(matches!(
        parse(FORM, &form(&p)).unwrap_err(),
        InteractionError::ActionCount(0)
    ));

    for bad in [
        "",
        "short",
        "has spaces in the key value",
        &"k".repeat(65),
        "APPROVAL#abcdefghijklmnop",
    ] {
        let err = parse(FORM, &form(&payload(ACTION_APPROVE, bad))).unwrap_err();
        assert!(matches!(err, InteractionError::BadKey), "{bad:?}: {err}");
    }

    for (url, ok) in [
        ("http://hooks.slack.com/actions/x", false),
        ("file:///etc/passwd", false),
        ("not a url", false),
        ("http://127.0.0.1:9/actions/x", true),
        ("http://localhost:9/actions/x", true),
        ("http://[::1]:9/actions/x", true),
    ] {
        let mut p = payload(ACTION_APPROVE, KEY);
        p["response_url"] = json!(url);
        let r = parse(FORM, &form(&p));
        assert_eq!(r.is_ok(), ok, "{url}: {r:?}");
        if !ok {
            assert!(matches!(r.unwrap_err(), InteractionError::BadResponseUrl));
        }
    }
}

#[test]
fn debug_hides_the_response_url_and_errors_hide_the_legacy_token() {
    let d = parse(FORM, &form(&payload(ACTION_APPROVE, KEY))).unwrap();
    let text = format!("{d:?}");
    assert!(!text.contains("hooks.slack.com"), "{text}");
    let mut p = payload(ACTION_APPROVE, KEY);
    p["user"]["id"] = json!(42);
    let err = parse(FORM, &form(&p)).unwrap_err().to_string();
    assert!(!err.contains("legacy-verification-token"), "{err}");
}
