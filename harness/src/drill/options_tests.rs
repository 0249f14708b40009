use super::*;

#[test]
fn an_incident_is_partition_by_default_or_app_down() {
    let parse = |v| Options::parse(Decision::Approve, Pace::Fast, v).map(|o| o.incident);
    assert_eq!(parse("").unwrap(), Incident::Partition);
    assert_eq!(parse("partition").unwrap(), Incident::Partition);
    assert_eq!(parse("app-down").unwrap(), Incident::AppDown);
}

#[test]
fn an_unknown_incident_or_one_for_a_switchover_is_refused() {
    let e = Options::parse(Decision::Approve, Pace::Fast, "quake").unwrap_err();
    assert!(e.to_string().contains("use partition or app-down"), "{e}");
    let e = Options::parse(Decision::Switchover, Pace::Fast, "app-down").unwrap_err();
    assert!(e.to_string().contains("not to a switchover"), "{e}");
    assert!(Options::parse(Decision::Switchover, Pace::Fast, "").is_ok());
}
