//! The Slack app's OAuth scopes: what the repository's manifest grants and
//! what each Web API method Handover calls accepts.
//!
//! The manifest is `infra/slack-manifest.json`, the file an operator pastes
//! into api.slack.com ("From a manifest"). The Slack stand-in grants exactly
//! its scopes, so a method the manifest does not cover fails locally as it
//! would in Slack.

use serde_json::Value;

/// The app manifest in the repository, as deployed.
pub const MANIFEST: &str = include_str!("../../../infra/slack-manifest.json");

/// The bot scopes each Web API method Handover calls accepts; any one of
/// them is enough (docs.slack.dev/reference/methods/<method>, "Scopes").
/// `auth.test` needs none.
pub const METHOD_SCOPES: &[(&str, &[&str])] = &[
    ("auth.test", &[]),
    ("chat.postMessage", &["chat:write"]),
    ("chat.update", &["chat:write"]),
    (
        "conversations.info",
        &["channels:read", "groups:read", "im:read", "mpim:read"],
    ),
    ("users.info", &["users:read"]),
];

/// The bot scopes `manifest` (Slack's app manifest JSON) grants.
pub fn bot_scopes(manifest: &str) -> Result<Vec<String>, String> {
    let doc: Value =
        serde_json::from_str(manifest).map_err(|e| format!("the manifest is not JSON: {e}"))?;
    doc["oauth_config"]["scopes"]["bot"]
        .as_array()
        .ok_or("the manifest has no oauth_config.scopes.bot list")?
        .iter()
        .map(|s| {
            s.as_str()
                .map(str::to_owned)
                .ok_or("a scope is not a string")
        })
        .collect::<Result<_, _>>()
        .map_err(str::to_owned)
}

/// The bot scopes the repository's manifest grants.
pub fn manifest_bot_scopes() -> Vec<String> {
    bot_scopes(MANIFEST).expect("infra/slack-manifest.json lists its bot scopes")
}

/// What `method` needs that `granted` lacks, as Slack's `needed` field
/// writes it (the accepted scopes, comma-separated); `None` when granted
/// or when the method is not one Handover calls.
pub fn missing(method: &str, granted: &[String]) -> Option<String> {
    let (_, accepted) = METHOD_SCOPES.iter().find(|(m, _)| *m == method)?;
    let covered = accepted.is_empty() || accepted.iter().any(|a| granted.iter().any(|g| g == a));
    (!covered).then(|| accepted.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manifest_covers_every_method_handover_calls() {
        let granted = manifest_bot_scopes();
        for (method, _) in METHOD_SCOPES {
            assert_eq!(missing(method, &granted), None, "{method} with {granted:?}");
        }
    }

    #[test]
    fn a_method_without_its_scope_names_what_it_needs() {
        let only_write = vec!["chat:write".to_owned()];
        assert_eq!(missing("chat.postMessage", &only_write), None);
        assert_eq!(missing("auth.test", &[]), None);
        assert_eq!(
            missing("conversations.info", &only_write).as_deref(),
            Some("channels:read,groups:read,im:read,mpim:read")
        );
        assert_eq!(
            missing("users.info", &only_write).as_deref(),
            Some("users:read")
        );
        assert_eq!(missing("admin.users.list", &only_write), None);
    }

    #[test]
    fn a_manifest_without_bot_scopes_is_refused() {
        assert!(
            bot_scopes("{}")
                .unwrap_err()
                .contains("oauth_config.scopes.bot")
        );
        assert!(bot_scopes("not json").unwrap_err().contains("not JSON"));
        let doc = r#"{"oauth_config": {"scopes": {"bot": ["chat:write", 3]}}}"#;
        assert!(bot_scopes(doc).unwrap_err().contains("not a string"));
    }
}
