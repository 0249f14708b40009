use super::*;

#[test]
fn the_fast_pace_is_the_default_and_keeps_the_compressed_figures() {
    assert_eq!(Pace::parse(None, None).unwrap(), Pace::Fast);
    assert_eq!(Pace::parse(Some("fast"), None).unwrap(), Pace::Fast);
    assert_eq!(Pace::Fast.secs(&PROMOTE_MODIFYING), 1.0);
    assert_eq!(Pace::Fast.to_real(5.0), None);
}

#[test]
fn the_real_pace_divides_every_figure_by_one_factor() {
    let pace = Pace::parse(Some("real"), Some("10")).unwrap();
    assert_eq!(pace, Pace::Real { scale: 10 });
    for f in WORLD {
        assert!((pace.secs(&f) * 10.0 - f.real_s).abs() < 1e-9, "{}", f.what);
        assert!(!f.source.is_empty(), "{} names no source", f.what);
    }
    // Seed 003's promotion: 69 s in all.
    let promotion = pace.secs(&PROMOTE_MODIFYING) + pace.secs(&PROMOTE_REBOOTING);
    assert!((promotion - 6.9).abs() < 1e-9);
    assert_eq!(pace.to_real(6.9).map(|s| s.round()), Some(69.0));
}

#[test]
fn a_pace_option_out_of_range_is_refused_with_what_to_use() {
    for (pace, scale, says) in [
        (Some("real"), None, "needs HANDOVER_SCALE"),
        (Some("real"), Some("0"), "1 to 10"),
        (Some("real"), Some("11"), "1 to 10"),
        (Some("real"), Some("2.5"), "whole number"),
        (Some("real"), Some("-3"), "whole number"),
        (Some("fast"), Some("10"), "only with HANDOVER_PACE=real"),
        (None, Some("10"), "only with HANDOVER_PACE=real"),
        (Some("slow"), None, "use fast or real"),
    ] {
        let e = Pace::parse(pace, scale).unwrap_err().to_string();
        assert!(e.contains(says), "{pace:?} {scale:?}: {e}");
    }
}

fn drill_plan() -> Plan {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    Plan::from_json(&std::fs::read_to_string(root.join("drill/plan.json")).unwrap()).unwrap()
}

#[test]
fn the_plan_is_scaled_by_the_same_factor_and_stays_valid() {
    for k in 1..=MAX_SCALE {
        let mut plan = drill_plan();
        Pace::Real { scale: k }.scale_plan(&mut plan);
        plan.validate()
            .unwrap_or_else(|e| panic!("k = {k}: the scaled drill plan is invalid: {e}"));
    }
    let mut plan = drill_plan();
    Pace::Real { scale: 10 }.scale_plan(&mut plan);
    assert_eq!((plan.targets.rto_s, plan.targets.rpo_s), (90, 6));
    assert_eq!(plan.timings.approval_timeout_s, 60);
    assert_eq!(plan.timings.promotion_poll_s, 1);
    assert_eq!(plan.timings.promotion_max_polls, 60);
    assert_eq!(plan.timings.cooldown_s, 180);
    assert_eq!(plan.fence.confirm_s, 18);
    // The ratio that mattered in issue 34: RPO target to a reboot.
    let reboot = Pace::Real { scale: 10 }.secs(&REBOOT);
    assert_eq!(plan.targets.rpo_s as f64 / reboot, 60.0 / REBOOT.real_s);
}

#[test]
fn the_fast_pace_leaves_the_plan_as_written() {
    let mut plan = drill_plan();
    Pace::Fast.scale_plan(&mut plan);
    assert_eq!(plan, drill_plan());
}

fn fmt(s: f64) -> String {
    format!("{s} s")
}

#[test]
fn the_reference_page_lists_every_figure_as_the_code_has_it() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let page = std::fs::read_to_string(root.join("docs/reference/pace.md")).unwrap();
    for f in WORLD {
        let row = format!(
            "| {} | {} | {} | {} |",
            f.what,
            fmt(f.real_s),
            fmt(f.fast_s),
            f.source
        );
        assert!(
            page.contains(&row),
            "docs/reference/pace.md lacks the row {row}"
        );
    }
    for f in PLAN {
        let row = format!("| `{}` | {} s | {} |", f.field, f.real_s, f.source);
        assert!(
            page.contains(&row),
            "docs/reference/pace.md lacks the row {row}"
        );
    }
    assert!(page.contains(&format!("k from 1 to {MAX_SCALE}")));
}
