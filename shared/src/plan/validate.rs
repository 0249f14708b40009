//! Plan validation: one function per section of the plan, each naming the
//! field it refuses and why. `validate` runs them in the document's order.

use super::*;
use std::collections::BTreeSet;

impl Plan {
    /// Rules serde cannot express. The first broken rule is returned.
    pub fn validate(&self) -> Result<(), PlanError> {
        self.validate_identity()?;
        self.validate_database()?;
        self.validate_dns()?;
        self.validate_canary()?;
        self.validate_rpo_table()?;
        self.validate_failback()?;
        self.validate_cli_approvers()?;
        self.validate_capacity()?;
        self.validate_slack()?;
        self.validate_detection()?;
        self.validate_timings()?;
        self.validate_fence()?;
        self.validate_explain()?;
        self.validate_target_groups()?;
        Ok(())
    }

    /// The service, the two sites and their Regions.
    fn validate_identity(&self) -> Result<(), PlanError> {
        non_empty(&self.version, "version")?;
        non_empty(&self.service, "service")?;
        // The execution name is `<service>-<region>-<T0>`, at most 80
        // characters: a long service would truncate T0 away and make every
        // incident's name the same.
        // (Other characters become `-` in the name, so only the length counts.)
        if self.service.chars().count() > MAX_SERVICE_LEN {
            return bad(
                "service",
                &format!(
                    "must be at most {MAX_SERVICE_LEN} characters: it starts every execution name, which holds at most 80"
                ),
            );
        }
        for (name, site) in [
            ("primary", &self.regions.primary),
            ("standby", &self.regions.standby),
        ] {
            let at = |f: &str| format!("regions.{name}.{f}");
            non_empty(&site.region, &at("region"))?;
            if !looks_like_region(&site.region) {
                return bad(
                    &at("region"),
                    "not an AWS Region code (like ap-northeast-2)",
                );
            }
            non_empty(&site.db_instance_id, &at("db_instance_id"))?;
            url(&site.endpoint, &at("endpoint"))?;
            non_empty(&site.health_check_id, &at("health_check_id"))?;
            non_empty(
                &site.fence_security_group_id,
                &at("fence_security_group_id"),
            )?;
        }
        if self.regions.primary.region == self.regions.standby.region {
            return bad(
                "regions.standby.region",
                "must differ from regions.primary.region",
            );
        }
        Ok(())
    }

    /// The database kind and backups.
    fn validate_database(&self) -> Result<(), PlanError> {
        if self.database.kind == DatabaseKind::AuroraGlobal {
            // Refused rather than accepted and failed later: diagnose reads a
            // replication source Aurora members lack, the lag gate reads the
            // per-instance ReplicaLag (Aurora's is the cluster-level
            // AuroraGlobalDBReplicationLag), and the fence changes instance
            // security groups (Aurora's belong to the cluster).
            return bad(
                "database.kind",
                "aurora_global is not supported end to end yet (diagnose, the lag gate and the fence are written for RDS instances); use rds_instance",
            );
        }
        if !(1..=35).contains(&self.database.backup_retention_days) {
            return bad("database.backup_retention_days", "must be between 1 and 35");
        }
        non_empty(&self.dns.hosted_zone_id, "dns.hosted_zone_id")?;
        non_empty(&self.dns.record_name, "dns.record_name")?;
        non_empty(&self.dns.standby_target, "dns.standby_target")?;
        Ok(())
    }

    /// The public record, the switch mode and the writer endpoint.
    fn validate_dns(&self) -> Result<(), PlanError> {
        if !self.dns.health_path.starts_with('/') {
            return bad("dns.health_path", "must start with /");
        }
        if let Some(u) = &self.dns.read_url {
            url(u, "dns.read_url")?;
        }
        if self.dns.record_type == RecordType::Alias
            && self.dns.switch_mode == SwitchMode::RecordUpsert
        {
            return bad(
                "dns.record_type",
                "alias records cannot be switched by record_upsert (it writes a CNAME, and an alias needs the load balancer's own hosted zone id): use health_check_failover or routing_control with alias failover records",
            );
        }
        if self.dns.switch_mode == SwitchMode::RoutingControl {
            if self.dns.arc_cluster_endpoints.is_empty() {
                return bad(
                    "dns.arc_cluster_endpoints",
                    "must name at least one cluster endpoint (required for switch_mode routing_control)",
                );
            }
            for (i, e) in self.dns.arc_cluster_endpoints.iter().enumerate() {
                url(
                    &e.endpoint,
                    &format!("dns.arc_cluster_endpoints.{i}.endpoint"),
                )?;
                non_empty(&e.region, &format!("dns.arc_cluster_endpoints.{i}.region"))?;
            }
            for (name, site) in [
                ("primary", &self.regions.primary),
                ("standby", &self.regions.standby),
            ] {
                if site
                    .routing_control_arn
                    .as_deref()
                    .is_none_or(str::is_empty)
                {
                    return bad(
                        &format!("regions.{name}.routing_control_arn"),
                        "missing (required for switch_mode routing_control)",
                    );
                }
            }
        }
        match &self.dns.writer {
            WriterEndpoint::Cname {
                hosted_zone_id,
                name,
                standby_target,
            } => {
                non_empty(hosted_zone_id, "dns.writer.cname.hosted_zone_id")?;
                non_empty(name, "dns.writer.cname.name")?;
                non_empty(standby_target, "dns.writer.cname.standby_target")?;
            }
            WriterEndpoint::SsmParameter {
                name,
                standby_value,
            } => {
                non_empty(name, "dns.writer.ssm_parameter.name")?;
                non_empty(standby_value, "dns.writer.ssm_parameter.standby_value")?;
            }
        }
        Ok(())
    }

    /// The canary.
    fn validate_canary(&self) -> Result<(), PlanError> {
        match &self.canary {
            Canary::Postgres {
                host,
                database,
                secret_arn,
                table,
                port,
                require_tls,
                ca_secret_arn,
                tls_server_name,
            } => {
                if let Some(host) = host {
                    non_empty(host, "canary.postgres.host")?;
                }
                if let Some(name) = tls_server_name {
                    non_empty(name, "canary.postgres.tls_server_name")?;
                }
                match (require_tls, ca_secret_arn) {
                    (true, None) => {
                        return bad(
                            "canary.postgres.ca_secret_arn",
                            "required when require_tls is true: RDS certificates chain to the Amazon RDS CA, which no system store holds",
                        );
                    }
                    (_, Some(arn)) => non_empty(arn, "canary.postgres.ca_secret_arn")?,
                    (false, None) => {}
                }
                non_empty(database, "canary.postgres.database")?;
                non_empty(secret_arn, "canary.postgres.secret_arn")?;
                if *port == 0 {
                    return bad("canary.postgres.port", "must be a TCP port (1-65535)");
                }
                if table.is_empty() || !table.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    return bad(
                        "canary.postgres.table",
                        "must be a plain SQL identifier ([A-Za-z0-9_]+)",
                    );
                }
            }
            Canary::Http { url: u } => url(u, "canary.http.url")?,
        }
        Ok(())
    }

    /// The table the RPO is measured on.
    fn validate_rpo_table(&self) -> Result<(), PlanError> {
        if let Some(t) = &self.rpo_table {
            let ident = |s: &str| {
                s.chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            };
            let parts: Vec<&str> = t.table.split('.').collect();
            if parts.len() > 2 || !parts.iter().all(|p| ident(p)) {
                return bad(
                    "rpo_table.table",
                    "must be a plain SQL identifier, optionally schema-qualified ([A-Za-z_][A-Za-z0-9_]*, or schema.table)",
                );
            }
            if !ident(&t.column) {
                return bad(
                    "rpo_table.column",
                    "must be a plain SQL identifier ([A-Za-z_][A-Za-z0-9_]*)",
                );
            }
            if let Some(db) = &t.database {
                non_empty(db, "rpo_table.database")?;
            }
        }
        Ok(())
    }

    /// The failback policy.
    fn validate_failback(&self) -> Result<(), PlanError> {
        if let Some(fb) = &self.failback {
            non_empty(&fb.primary_target, "failback.primary_target")?;
            if fb.primary_target.trim_end_matches('.')
                == self.dns.standby_target.trim_end_matches('.')
            {
                return bad(
                    "failback.primary_target",
                    "must be P's target, not dns.standby_target (S's)",
                );
            }
            let ident = |s: &str| {
                s.chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            };
            for (i, t) in fb.tables.iter().enumerate() {
                let parts: Vec<&str> = t.table.split('.').collect();
                if parts.len() > 2 || !parts.iter().all(|p| ident(p)) {
                    return bad(
                        &format!("failback.tables.{i}.table"),
                        "must be a plain SQL identifier, optionally schema-qualified",
                    );
                }
                if !ident(&t.key) {
                    return bad(
                        &format!("failback.tables.{i}.key"),
                        "must be a plain SQL identifier ([A-Za-z_][A-Za-z0-9_]*)",
                    );
                }
                if let Some(db) = &t.database {
                    non_empty(db, &format!("failback.tables.{i}.database"))?;
                }
            }
            // Without it, a canary with a fixed host still fails over; only
            // the way back needs P's address (`Plan::reversed` says so).
            if let Some(h) = &fb.canary_host {
                non_empty(h, "failback.canary_host")?;
            }
            if fb.canary_port == Some(0) {
                return bad("failback.canary_port", "must be a TCP port (1-65535)");
            }
            if fb.reprotect_timeout_s < 60 {
                return bad("failback.reprotect_timeout_s", "must be at least 60");
            }
            if !(fb.lag_near_zero_s.is_finite() && fb.lag_near_zero_s >= 0.0) {
                return bad(
                    "failback.lag_near_zero_s",
                    "must be a number of seconds, 0 or more",
                );
            }
        }
        Ok(())
    }

    /// The IAM principals that may decide from the CLI.
    fn validate_cli_approvers(&self) -> Result<(), PlanError> {
        let mut seen_arns = BTreeSet::new();
        for (i, a) in self.cli_approvers.iter().enumerate() {
            if iam_principal(&a.arn).is_none() {
                return bad(
                    &format!("cli_approvers.{i}.arn"),
                    "must be an IAM role or user ARN (arn:aws:iam::<12-digit account>:role/Name or :user/Name)",
                );
            }
            non_empty(&a.name, &format!("cli_approvers.{i}.name"))?;
            if !seen_arns.insert(a.arn.as_str()) {
                return bad(&format!("cli_approvers.{i}.arn"), "listed twice");
            }
        }
        Ok(())
    }

    /// The Slack channel, the approvers and the app's secrets.
    fn validate_slack(&self) -> Result<(), PlanError> {
        non_empty(&self.slack.channel, "slack.channel")?;
        if self.slack.approvers.is_empty() {
            return bad("slack.approvers", "must name at least one approver");
        }
        let mut seen = BTreeSet::new();
        for (i, a) in self.slack.approvers.iter().enumerate() {
            non_empty(&a.user_id, &format!("slack.approvers.{i}.user_id"))?;
            non_empty(&a.name, &format!("slack.approvers.{i}.name"))?;
            if !seen.insert(a.user_id.as_str()) {
                return bad(&format!("slack.approvers.{i}.user_id"), "listed twice");
            }
        }
        non_empty(
            &self.slack.bot_token_secret_arn,
            "slack.bot_token_secret_arn",
        )?;
        non_empty(&self.slack.signing_secret_arn, "slack.signing_secret_arn")?;
        Ok(())
    }

    /// The targets and detection.
    fn validate_detection(&self) -> Result<(), PlanError> {
        if self.targets.rto_s == 0 {
            return bad("targets.rto_s", "must be at least 1");
        }
        if self.detection.failures_to_trigger == 0 {
            return bad("detection.failures_to_trigger", "must be at least 1");
        }
        if self.detection.probe_timeout_ms == 0 {
            return bad("detection.probe_timeout_ms", "must be at least 1");
        }
        if !(0.0..=1.0).contains(&self.detection.healthy_share_below) {
            return bad("detection.healthy_share_below", "must be between 0 and 1");
        }
        Ok(())
    }

    /// The timings, the planned switchover and the lock lease.
    fn validate_timings(&self) -> Result<(), PlanError> {
        let t = &self.timings;
        for (v, name) in [
            (t.approval_timeout_s, "approval_timeout_s"),
            (t.promotion_poll_s, "promotion_poll_s"),
            (t.verify_deadline_s, "verify_deadline_s"),
            (t.lock_lease_s, "lock_lease_s"),
            (t.call_timeout_ms, "call_timeout_ms"),
        ] {
            if v == 0 {
                return bad(&format!("timings.{name}"), "must be at least 1");
            }
        }
        if t.promotion_max_polls == 0 {
            return bad("timings.promotion_max_polls", "must be at least 1");
        }
        if t.approval_timeout_s > 24 * 60 * 60 {
            return bad(
                "timings.approval_timeout_s",
                "must be at most 86400 (a day)",
            );
        }
        if t.lock_lease_s > MAX_RUN_S {
            return bad(
                "timings.lock_lease_s",
                &format!("must be at most {MAX_RUN_S} (the state machine's TimeoutSeconds)"),
            );
        }
        let sw = &self.switchover;
        if sw.poll_s == 0 {
            return bad("switchover.poll_s", "must be at least 1");
        }
        if sw.settle_s < sw.poll_s {
            return bad(
                "switchover.settle_s",
                "must be at least poll_s: the condition must hold over two readings or more",
            );
        }
        if sw.timeout_s < sw.settle_s.saturating_add(sw.poll_s) {
            return bad(
                "switchover.timeout_s",
                "must be at least settle_s + poll_s: the condition must be able to hold for settle_s",
            );
        }
        // P takes no writes while the catch-up waits; and each reading is
        // a few history events (a run holds at most 25,000).
        if sw.timeout_s > MAX_CATCH_UP_S {
            return bad(
                "switchover.timeout_s",
                &format!("must be at most {MAX_CATCH_UP_S} s: P takes no writes while it waits"),
            );
        }
        // The state machine's own TimeoutSeconds must outlive the longest
        // run, or a healthy run is cut off. (The lock's lease counts it
        // itself: [`Plan::failover_lease_s`].)
        let worst = run_bound::switchover_run_s(self);
        if worst > MAX_RUN_S {
            return bad(
                "timings",
                &format!(
                    "the longest run, every task retried to its limit, is {worst} s, more than the state machine's TimeoutSeconds ({MAX_RUN_S} s)"
                ),
            );
        }
        if t.verify_deadline_s > MAX_VERIFY_DEADLINE_S {
            return bad(
                "timings.verify_deadline_s",
                &format!(
                    "must be at most {MAX_VERIFY_DEADLINE_S} (verify's Lambda timeout is 900 s)"
                ),
            );
        }
        if t.dns_sync_s == 0 || t.dns_sync_s > MAX_DNS_SYNC_S {
            return bad(
                "timings.dns_sync_s",
                &format!("must be 1 to {MAX_DNS_SYNC_S} (switch's Lambda timeout is 120 s)"),
            );
        }
        if t.call_timeout_ms > MAX_CALL_TIMEOUT_MS {
            return bad(
                "timings.call_timeout_ms",
                &format!(
                    "must be at most {MAX_CALL_TIMEOUT_MS} (the steps' Lambda timeout is 60 s)"
                ),
            );
        }
        Ok(())
    }

    /// The fence's budgets.
    fn validate_fence(&self) -> Result<(), PlanError> {
        if self.fence.timeout_ms == 0 {
            return bad("fence.timeout_ms", "must be at least 1");
        }
        if self.fence.confirm_s == 0 || self.fence.confirm_s > MAX_FENCE_CONFIRM_S {
            return bad(
                "fence.confirm_s",
                &format!(
                    "must be 1 to {MAX_FENCE_CONFIRM_S} (the fence's Lambda timeout is 300 s)"
                ),
            );
        }
        // The wait, plus the calls that may each take a whole budget past it
        // (describe, modify, the last describe and reboot, the store writes),
        // plus the wait for audit's sweep to end a claim on P's groups.
        let sweep_ms = FENCE_SWEEP_WAIT_MS;
        if self.fence.confirm_s * 1000 + 8 * self.fence.timeout_ms + sweep_ms > 290_000 {
            return bad(
                "fence",
                &format!(
                    "confirm_s plus eight calls of timeout_ms plus {} s for audit's sweep must fit in 290 s (the fence's Lambda timeout is 300 s)",
                    sweep_ms / 1000
                ),
            );
        }
        Ok(())
    }

    /// The optional explanation.
    fn validate_explain(&self) -> Result<(), PlanError> {
        if let Some(x) = &self.explain {
            non_empty(&x.model_id, "explain.model_id")?;
            if let Some(r) = &x.region {
                non_empty(r, "explain.region")?;
            }
            if x.timeout_ms == 0 || x.timeout_ms > EXPLAIN_MAX_TIMEOUT_MS {
                return bad(
                    "explain.timeout_ms",
                    &format!("must be between 1 and {EXPLAIN_MAX_TIMEOUT_MS}"),
                );
            }
        }
        Ok(())
    }

    /// Each site's target groups, in its own Region.
    fn validate_target_groups(&self) -> Result<(), PlanError> {
        for (site, name) in [
            (&self.regions.primary, "primary"),
            (&self.regions.standby, "standby"),
        ] {
            for (i, arn) in site.target_group_arns.iter().enumerate() {
                target_group_arn(arn, &site.region).map_err(|problem| PlanError {
                    path: format!("plan.regions.{name}.target_group_arns[{i}]"),
                    problem,
                })?;
            }
        }
        Ok(())
    }

    /// `capacity`: names given, minimums of at least 1, nothing twice.
    fn validate_capacity(&self) -> Result<(), PlanError> {
        let bad = |path: String, problem: &str| {
            Err(PlanError {
                path: format!("plan.capacity.{path}"),
                problem: problem.into(),
            })
        };
        let c = &self.capacity;
        let mut seen = BTreeSet::new();
        for (i, e) in c.ecs_services.iter().enumerate() {
            non_empty(&e.cluster, &format!("capacity.ecs_services.{i}.cluster"))?;
            non_empty(&e.service, &format!("capacity.ecs_services.{i}.service"))?;
            if e.min_running == 0 {
                return bad(
                    format!("ecs_services.{i}.min_running"),
                    "must be at least 1 (a minimum of 0 checks nothing)",
                );
            }
            if !seen.insert(("ecs", e.cluster.as_str(), e.service.as_str())) {
                return bad(format!("ecs_services.{i}"), "listed twice");
            }
        }
        for (i, g) in c.auto_scaling_groups.iter().enumerate() {
            non_empty(&g.name, &format!("capacity.auto_scaling_groups.{i}.name"))?;
            if g.min_in_service == 0 {
                return bad(
                    format!("auto_scaling_groups.{i}.min_in_service"),
                    "must be at least 1 (a minimum of 0 checks nothing)",
                );
            }
            if !seen.insert(("asg", "", g.name.as_str())) {
                return bad(format!("auto_scaling_groups.{i}"), "listed twice");
            }
        }
        for (i, n) in c.eks_node_groups.iter().enumerate() {
            non_empty(&n.cluster, &format!("capacity.eks_node_groups.{i}.cluster"))?;
            non_empty(
                &n.node_group,
                &format!("capacity.eks_node_groups.{i}.node_group"),
            )?;
            if n.min_nodes == 0 {
                return bad(
                    format!("eks_node_groups.{i}.min_nodes"),
                    "must be at least 1 (a minimum of 0 checks nothing)",
                );
            }
            if !seen.insert(("eks", n.cluster.as_str(), n.node_group.as_str())) {
                return bad(format!("eks_node_groups.{i}"), "listed twice");
            }
        }
        Ok(())
    }
}

/// A refusal of the field at `path` (under `plan.`), with the problem.
fn bad(path: &str, problem: &str) -> Result<(), PlanError> {
    Err(PlanError {
        path: format!("plan.{path}"),
        problem: problem.into(),
    })
}

/// `arn:<partition>:elasticloadbalancing:<region>:<account>:targetgroup/<name>/<id>`,
/// in the site's own Region.
fn target_group_arn(arn: &str, region: &str) -> Result<(), String> {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    let [a, _partition, service, arn_region, _account, resource] = parts.as_slice() else {
        return Err(format!("{arn:?} is not an ARN"));
    };
    if *a != "arn" || *service != "elasticloadbalancing" || !resource.starts_with("targetgroup/") {
        return Err(format!("{arn:?} is not a target group ARN"));
    }
    if arn_region != &region {
        return Err(format!(
            "{arn:?} is in {arn_region}, but this site is in {region}"
        ));
    }
    Ok(())
}

fn non_empty(value: &str, path: &str) -> Result<(), PlanError> {
    if value.trim().is_empty() {
        return Err(PlanError {
            path: format!("plan.{path}"),
            problem: "must not be empty".into(),
        });
    }
    Ok(())
}

fn url(value: &str, path: &str) -> Result<(), PlanError> {
    non_empty(value, path)?;
    if !(value.starts_with("https://") || value.starts_with("http://")) {
        return Err(PlanError {
            path: format!("plan.{path}"),
            problem: "must be an http(s) URL".into(),
        });
    }
    Ok(())
}

fn looks_like_region(r: &str) -> bool {
    let parts: Vec<&str> = r.split('-').collect();
    parts.len() >= 3
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
        && parts
            .last()
            .is_some_and(|p| p.chars().all(|c| c.is_ascii_digit()))
}
