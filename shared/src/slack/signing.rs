//! Slack request signing (v0).
//!
//! Slack signs every request it sends: `X-Slack-Signature` is `v0=` plus the
//! hex HMAC-SHA256, keyed with the app's signing secret, of
//! `v0:{X-Slack-Request-Timestamp}:{raw body}`. A request is genuine when the
//! MAC matches (compared in constant time) and the timestamp is within five
//! minutes of now, which bounds replays. See Slack's "Verifying requests from
//! Slack".

use crate::clock::Clock;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// The signature header (API Gateway lower-cases header names).
pub const SIGNATURE_HEADER: &str = "x-slack-signature";
/// The timestamp header: Unix seconds when Slack sent the request.
pub const TIMESTAMP_HEADER: &str = "x-slack-request-timestamp";
/// How far the timestamp may be from now, either way, in seconds.
pub const MAX_SKEW_S: i64 = 5 * 60;

const VERSION: &str = "v0";

/// Why a request is not accepted as coming from Slack. Each case is its own
/// variant so logs and tests can tell them apart; all of them mean HTTP 401.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// No `X-Slack-Request-Timestamp` header.
    #[error("missing header {TIMESTAMP_HEADER}")]
    MissingTimestamp,
    /// No `X-Slack-Signature` header.
    #[error("missing header {SIGNATURE_HEADER}")]
    MissingSignature,
    /// The timestamp is not a whole number of seconds.
    #[error("header {TIMESTAMP_HEADER} is not a Unix timestamp")]
    GarbledTimestamp,
    /// The signature is not `v0=` followed by 64 hex digits.
    #[error("header {SIGNATURE_HEADER} is not v0=<64 hex digits>")]
    GarbledSignature,
    /// The timestamp is too far from now: a replay or a badly wrong clock.
    #[error("request timestamp is {skew_s} s from now (limit {MAX_SKEW_S} s)")]
    Stale {
        /// Now minus the request's timestamp, seconds (negative: from the future).
        skew_s: i64,
    },
    /// The MAC does not match: wrong secret or altered body.
    #[error("signature does not match the body")]
    Mismatch,
}

/// Check a request's signature against `secret`, with `clock` deciding "now".
/// `body` is the raw body exactly as received (after any base64 decoding
/// done by API Gateway), never a re-encoded form.
pub fn verify(
    secret: &[u8],
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    clock: &dyn Clock,
) -> Result<(), SignatureError> {
    let timestamp = timestamp.ok_or(SignatureError::MissingTimestamp)?.trim();
    let signature = signature.ok_or(SignatureError::MissingSignature)?.trim();
    let ts: i64 = timestamp
        .parse()
        .map_err(|_| SignatureError::GarbledTimestamp)?;
    let given = signature
        .strip_prefix("v0=")
        .filter(|h| h.len() == 64)
        .and_then(|h| hex::decode(h).ok())
        .ok_or(SignatureError::GarbledSignature)?;
    let skew_s = clock.now().timestamp().saturating_sub(ts);
    if skew_s.abs() > MAX_SKEW_S {
        return Err(SignatureError::Stale { skew_s });
    }
    let expected = mac(secret, timestamp, body);
    if bool::from(expected.as_slice().ct_eq(given.as_slice())) {
        Ok(())
    } else {
        Err(SignatureError::Mismatch)
    }
}

/// The `X-Slack-Signature` value Slack would send for `body` at `timestamp`.
/// Used by tests and the drill to sign requests exactly as Slack does.
pub fn sign(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    format!(
        "{VERSION}={}",
        hex::encode(mac(secret, &timestamp.to_string(), body))
    )
}

fn mac(secret: &[u8], timestamp: &str, body: &[u8]) -> Vec<u8> {
    // HMAC accepts keys of any length; new_from_slice cannot fail for it.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret)
        .unwrap_or_else(|_| unreachable!("HMAC-SHA256 takes keys of any length"));
    mac.update(VERSION.as_bytes());
    mac.update(b":");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
    mac.finalize().into_bytes().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FixedClock;
    use chrono::{TimeZone, Utc};

    // The worked example from Slack's "Verifying requests from Slack".
    const SECRET: &[u8] = b"8f742231b10e8888abcd99yyyzzz85a5";
    const TS: i64 = 1_531_420_618;
    const BODY: &[u8] = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    const EXPECTED: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

    fn at(offset_s: i64) -> FixedClock {
        FixedClock(Utc.timestamp_opt(TS + offset_s, 0).unwrap())
    }

    fn check(
        ts: Option<&str>,
        sig: Option<&str>,
        body: &[u8],
        clock: FixedClock,
    ) -> Result<(), SignatureError> {
        verify(SECRET, ts, sig, body, &clock)
    }

    #[test]
    fn slacks_published_vector_signs_and_verifies() {
        assert_eq!(sign(SECRET, TS, BODY), EXPECTED);
        assert_eq!(
            check(Some("1531420618"), Some(EXPECTED), BODY, at(0)),
            Ok(())
        );
        assert_eq!(
            check(Some("1531420618"), Some(EXPECTED), BODY, at(299)),
            Ok(())
        );
        assert_eq!(
            check(Some("1531420618"), Some(EXPECTED), BODY, at(-299)),
            Ok(())
        );
    }

    #[test]
    fn a_body_altered_by_one_byte_is_a_mismatch() {
        let mut body = BODY.to_vec();
        let last = body.len() - 1;
        body[last] ^= 0x01;
        assert_eq!(
            check(Some("1531420618"), Some(EXPECTED), &body, at(0)),
            Err(SignatureError::Mismatch)
        );
    }

    #[test]
    fn a_wrong_secret_is_a_mismatch() {
        let forged = sign(b"not-the-signing-secret", TS, BODY);
        assert_eq!(
            check(Some("1531420618"), Some(&forged), BODY, at(0)),
            Err(SignatureError::Mismatch)
        );
    }

    #[test]
    fn a_timestamp_six_minutes_old_is_stale_even_when_correctly_signed() {
        assert_eq!(
            check(Some("1531420618"), Some(EXPECTED), BODY, at(360)),
            Err(SignatureError::Stale { skew_s: 360 })
        );
        assert_eq!(
            check(Some("1531420618"), Some(EXPECTED), BODY, at(-360)),
            Err(SignatureError::Stale { skew_s: -360 })
        );
    }

    #[test]
    fn a_signature_for_another_timestamp_does_not_verify() {
        // Moving the timestamp forward to dodge the window breaks the MAC.
        assert_eq!(
            check(Some("1531420700"), Some(EXPECTED), BODY, at(100)),
            Err(SignatureError::Mismatch)
        );
    }

    #[test]
    fn missing_and_garbled_headers_are_distinct_errors() {
        let ts = Some("1531420618");
        assert_eq!(
            check(None, Some(EXPECTED), BODY, at(0)),
            Err(SignatureError::MissingTimestamp)
        );
        assert_eq!(
            check(ts, None, BODY, at(0)),
            Err(SignatureError::MissingSignature)
        );
        assert_eq!(
            check(Some("yesterday"), Some(EXPECTED), BODY, at(0)),
            Err(SignatureError::GarbledTimestamp)
        );
        assert_eq!(
            check(Some(""), Some(EXPECTED), BODY, at(0)),
            Err(SignatureError::GarbledTimestamp)
        );
        for garbled in [
            "a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503",
            "v1=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503",
            "v0=a2114d57",
            "v0=zz114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503",
            "",
        ] {
            assert_eq!(
                check(ts, Some(garbled), BODY, at(0)),
                Err(SignatureError::GarbledSignature),
                "{garbled:?}"
            );
        }
    }

    #[test]
    fn error_messages_never_carry_the_signature_or_secret() {
        let err = check(Some("1531420618"), Some(&sign(b"x", TS, BODY)), BODY, at(0)).unwrap_err();
        let text = err.to_string();
        assert!(!text.contains("8f742231"), "{text}");
        assert!(!text.contains(&EXPECTED[3..]), "{text}");
    }
}
