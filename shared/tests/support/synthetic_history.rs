//! A synthetic GetExecutionHistory of any length, served in pages: the
//! golden drill with its promotion poll loop (WaitPromotion → PromotionStatus
//! → IsPromoted) repeated until the history has exactly `total` events.
//! Events are made on demand from their index, so a reader that streams
//! pages never has the whole history in memory (the benchmark relies on it).
//! Shared by `tests/report_pagination.rs` and `benches/report_history.rs`.

use chrono::Duration;
use handover::adapters::AwsError;
use handover::report::HistoryEvent;
use handover::report::parse_history_json;
use handover::report::sources::{ExecutionHistory, HistoryPage};
use serde_json::Value;
use std::sync::atomic::{AtomicUsize, Ordering};

const GOLDEN: &str = include_str!("../fixtures/history_drill_succeeded.json");

/// The generator.
pub struct Synthetic {
    prefix: Vec<HistoryEvent>,
    suffix: Vec<HistoryEvent>,
    /// Full poll cycles (9 events each).
    pub loops: usize,
    /// Extra Wait visits after the cycles, to reach the exact length.
    filler: Vec<HistoryEvent>,
    doc: serde_json::Map<String, Value>,
    promotion: Value,
    total: usize,
}

impl Synthetic {
    /// A history of exactly `total` events.
    pub fn new(total: usize) -> Self {
        let golden = parse_history_json(GOLDEN).expect("golden fixture");
        let promote_exit = golden
            .iter()
            .position(|e| e.kind == "TaskStateExited" && e.state.as_deref() == Some("Promote"))
            .expect("Promote exit");
        let switch_enter = golden
            .iter()
            .position(|e| e.kind == "TaskStateEntered" && e.state.as_deref() == Some("Switch"))
            .expect("Switch entry");
        let prefix = golden[..=promote_exit].to_vec();
        let suffix = golden[switch_enter..].to_vec();
        let doc: Value =
            serde_json::from_str(prefix[promote_exit].output.as_deref().expect("output"))
                .expect("doc");
        let doc = doc.as_object().expect("object").clone();
        let promotion = doc["promotion"].clone();
        let rest = total - prefix.len() - suffix.len();
        let (mut loops, mut r) = (rest / 9, rest % 9);
        // An odd remainder takes one cycle back (9 events) so the rest is Wait visits, 2 events each.
        if r % 2 == 1 {
            loops -= 1;
            r += 9;
        }
        let mut s = Synthetic {
            prefix,
            suffix,
            loops,
            filler: Vec::new(),
            doc,
            promotion,
            total,
        };
        let base = s.prefix.len() + 9 * loops;
        let mut filler = Vec::new();
        for k in 0..r {
            let kind = if k % 2 == 0 {
                "WaitStateEntered"
            } else {
                "WaitStateExited"
            };
            filler.push(s.make(base + k, kind, Some("WaitPromotion"), None));
        }
        s.filler = filler;
        // Later outputs carry the last poll's promotion, as the real document would.
        let last: Value = serde_json::from_str(&s.poll_output(loops - 1)).expect("poll output");
        for e in &mut s.suffix {
            if let Some(out) = &e.output
                && let Ok(Value::Object(mut doc)) = serde_json::from_str::<Value>(out)
            {
                doc.insert("promotion".into(), last["promotion"].clone());
                e.output = Some(Value::Object(doc).to_string());
            }
        }
        s
    }

    /// Number of events.
    pub fn len(&self) -> usize {
        self.total
    }

    fn at(&self, i: usize) -> chrono::DateTime<chrono::Utc> {
        let start = self.prefix.last().expect("prefix").timestamp;
        start + Duration::milliseconds(i as i64 * 100)
    }

    fn make(
        &self,
        i: usize,
        kind: &str,
        state: Option<&str>,
        output: Option<String>,
    ) -> HistoryEvent {
        HistoryEvent {
            id: i as i64 + 1,
            previous_event_id: i as i64,
            timestamp: self.at(i),
            kind: kind.into(),
            state: state.map(str::to_owned),
            input: None,
            output,
            error: None,
            cause: None,
            resource: None,
        }
    }

    fn poll_output(&self, k: usize) -> String {
        let mut promotion = self.promotion.clone();
        promotion["polls"] = Value::from(k + 1);
        if k + 1 == self.loops {
            promotion["status"] = Value::from("promoted");
            promotion["promoted_at"] =
                Value::from(self.at(self.prefix.len() + 9 * k + 6).to_rfc3339());
            promotion["db_status"] = Value::from("available");
        }
        let mut doc = self.doc.clone();
        doc.insert("promotion".into(), promotion);
        Value::Object(doc).to_string()
    }

    /// Event `i` (0-based).
    pub fn event(&self, i: usize) -> HistoryEvent {
        let p = self.prefix.len();
        if i < p {
            return self.prefix[i].clone();
        }
        let cycles_end = p + 9 * self.loops;
        if i < cycles_end {
            let (k, j) = ((i - p) / 9, (i - p) % 9);
            let (kind, state) = [
                ("WaitStateEntered", Some("WaitPromotion")),
                ("WaitStateExited", Some("WaitPromotion")),
                ("TaskStateEntered", Some("PromotionStatus")),
                ("TaskScheduled", None),
                ("TaskStarted", None),
                ("TaskSucceeded", None),
                ("TaskStateExited", Some("PromotionStatus")),
                ("ChoiceStateEntered", Some("IsPromoted")),
                ("ChoiceStateExited", Some("IsPromoted")),
            ][j];
            let output = (j == 6).then(|| self.poll_output(k));
            return self.make(i, kind, state, output);
        }
        let f = cycles_end + self.filler.len();
        if i < f {
            return self.filler[i - cycles_end].clone();
        }
        let mut e = self.suffix[i - f].clone();
        let shift = self.at(i) - self.suffix[0].timestamp;
        e.timestamp += shift;
        e.id = i as i64 + 1;
        e.previous_event_id = i as i64;
        e
    }
}

/// A fake states:GetExecutionHistory serving [`Synthetic`] in pages; the
/// token is the index of the next event.
pub struct Pager {
    /// The history.
    pub history: Synthetic,
    /// Pages served.
    pub calls: AtomicUsize,
    /// Largest page size asked for.
    pub max_asked: AtomicUsize,
}

impl Pager {
    /// Serve a history of `total` events.
    pub fn new(total: usize) -> Self {
        Pager {
            history: Synthetic::new(total),
            calls: AtomicUsize::new(0),
            max_asked: AtomicUsize::new(0),
        }
    }
}

impl ExecutionHistory for Pager {
    async fn page(
        &self,
        _arn: &str,
        token: Option<String>,
        max: i32,
    ) -> Result<HistoryPage, AwsError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.max_asked.fetch_max(max as usize, Ordering::Relaxed);
        let start: usize = token.as_deref().map_or(0, |t| t.parse().expect("token"));
        let end = (start + max as usize).min(self.history.len());
        Ok(HistoryPage {
            events: (start..end).map(|i| self.history.event(i)).collect(),
            next_token: (end < self.history.len()).then(|| end.to_string()),
        })
    }
}
