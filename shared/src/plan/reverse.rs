//! The plan seen from the other side: after a failover, S is the primary
//! and a failback is a planned switchover in the reversed plan.

use super::*;

/// The failback section is missing or does not fit the plan, or the
/// values a failback must restore are not on record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReverseError(pub String);

impl fmt::Display for ReverseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ReverseError {}

/// The writer endpoint's key in the primary record's `switch_previous`
/// (what switch recorded before moving it).
pub fn writer_lever(writer: &WriterEndpoint) -> String {
    match writer {
        WriterEndpoint::Cname {
            hosted_zone_id,
            name,
            ..
        } => format!("route53:{hosted_zone_id}:{name} CNAME (writer)"),
        WriterEndpoint::SsmParameter { name, .. } => format!("ssm:{name} (writer)"),
    }
}

impl Plan {
    /// The plan seen from S after a failover: S is `primary`, P `standby`,
    /// so a planned switchover in this plan moves back to P. The public
    /// name's target is `failback.primary_target`, the writer endpoint's is
    /// the value switch recorded before the failover moved it
    /// (`previous`, the record's `switch_previous`), the canary reaches P
    /// (`failback.canary_host`, or P's RDS endpoint), and the dependency
    /// list (S's resources) is left out: it names nothing of P's.
    pub fn reversed(
        &self,
        previous: &std::collections::BTreeMap<String, Option<String>>,
    ) -> Result<Plan, ReverseError> {
        let fb = self.failback.as_ref().ok_or_else(|| {
            ReverseError("plan.failback is missing: it names P's public target (primary_target) and the tables to compare".into())
        })?;
        let mut out = self.clone();
        std::mem::swap(&mut out.regions.primary, &mut out.regions.standby);
        out.dns.standby_target = fb.primary_target.clone();
        let lever = writer_lever(&self.dns.writer);
        let before = match previous.get(&lever) {
            Some(Some(v)) if !v.trim().is_empty() => v.clone(),
            Some(_) => {
                return Err(ReverseError(format!(
                    "{lever} had no value before the failover (switch_previous records none): set the writer back by hand and give the plan's writer a value to restore"
                )));
            }
            None => {
                return Err(ReverseError(format!(
                    "the writer endpoint's value before the failover is not on record (switch_previous has no {lever}): the failover did not move it, or ran before Handover recorded it"
                )));
            }
        };
        match &mut out.dns.writer {
            WriterEndpoint::Cname { standby_target, .. } => *standby_target = before,
            WriterEndpoint::SsmParameter { standby_value, .. } => *standby_value = before,
        }
        if let Canary::Postgres {
            host,
            port,
            tls_server_name,
            ..
        } = &mut out.canary
        {
            if host.is_some() {
                *host = Some(fb.canary_host.clone().ok_or_else(|| {
                    ReverseError("plan.failback.canary_host is required: canary.postgres.host names a fixed address for S's database, so P's must be named too".into())
                })?);
                if let Some(p) = fb.canary_port {
                    *port = p;
                }
            }
            // The name the plan pinned is S's; the default is the promoted
            // instance's own endpoint, which is P's in this plan.
            *tls_server_name = None;
        }
        out.dependencies.clear();
        // The compute named is S's; P's side after the trip is not described.
        out.capacity = Capacity::default();
        out.failback = None;
        Ok(out)
    }
}
